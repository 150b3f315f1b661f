"""Access stamps off the read path: buffered, merged into what reads report, written in
batches, exactly once whichever side of a flush a read falls."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.access_buffer import AccessBuffer
from tests.api.helpers import remember
from tests.conftest import Tenant, drain_until_caught_up

AT = datetime(2026, 5, 1, tzinfo=UTC)


def _row(runtime: Runtime, memory_id: uuid.UUID) -> tuple[int | None, datetime | None]:
    """The memory's ``memory_access`` row as the table holds it (no flush first)."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT accesses, last_access FROM "{schema}".memory_access WHERE memory_id = %s',
            (memory_id,),
        ).fetchone()
    return (None, None) if row is None else (int(row[0]), row[1])


def _memories(client: TestClient, tenant: Tenant, runtime: Runtime, n: int) -> list[uuid.UUID]:
    ids = [uuid.UUID(remember(client, tenant.headers())["id"]) for _ in range(n)]
    drain_until_caught_up(runtime)
    return ids


def test_stamps_wait_in_the_buffer_and_reads_count_them_until_a_flush_writes_them(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a buffer whose thread would not flush for an hour
    buffer = AccessBuffer(runtime.log, interval_s=3600)
    one, two = _memories(client, tenant, runtime, 2)
    try:
        # When reads stamp accesses
        buffer.add(tenant.id, [one, two], AT)
        buffer.add(tenant.id, [one], AT + timedelta(seconds=5))
        # Then nothing is written on their path, yet what a read reports counts them
        assert _row(runtime, one) == (None, None)
        assert buffer.unwritten(one, None) == [(2, AT + timedelta(seconds=5))]
        # And a flush writes the merged counts, one row a memory
        assert buffer.flush() == 2
        assert _row(runtime, one) == (2, AT + timedelta(seconds=5))
        assert _row(runtime, two) == (1, AT)
    finally:
        buffer.close()


def test_a_read_counts_a_flush_once_whichever_side_of_it_its_row_was_read(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    buffer = AccessBuffer(runtime.log, interval_s=3600)
    (memory,) = _memories(client, tenant, runtime, 1)
    try:
        buffer.add(tenant.id, [memory], AT)
        before, _ = _row(runtime, memory)  # a read's row, read before the flush
        buffer.flush()
        after, _ = _row(runtime, memory)  # and one read after it
        assert (before, after) == (None, 1)
        # The stamp the flush wrote counts for the first row, not again for the second.
        assert sum(n for n, _ in buffer.unwritten(memory, before)) == 1
        assert sum(n for n, _ in buffer.unwritten(memory, after)) == 0
    finally:
        buffer.close()


def test_a_full_buffer_is_written_by_the_read_that_fills_it_and_close_writes_the_rest(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    buffer = AccessBuffer(runtime.log, interval_s=3600, max_pending=3)
    ids = _memories(client, tenant, runtime, 4)
    buffer.add(tenant.id, ids[:2], AT)
    assert [_row(runtime, m)[0] for m in ids] == [None] * 4
    buffer.add(tenant.id, ids[2:3], AT)  # the third fills it: written at once
    assert [_row(runtime, m)[0] for m in ids] == [1, 1, 1, None]
    buffer.add(tenant.id, ids[3:], AT)
    buffer.close()  # at shutdown: nothing left behind
    assert [_row(runtime, m)[0] for m in ids] == [1, 1, 1, 1]


def test_concurrent_reads_and_flushes_count_every_access_exactly_once(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a flush thread writing every 10 ms while four threads stamp one memory
    buffer = AccessBuffer(runtime.log, interval_s=0.01)
    (memory,) = _memories(client, tenant, runtime, 1)
    stamps_each = 300
    seen: list[tuple[int, int, int]] = []  # (stamped before, reported, stamped after)
    errors: list[Exception] = []
    stop = threading.Event()
    issued = [0]
    issuing = threading.Lock()  # a stamp and its count, one step for the reader

    def stamp() -> None:
        for _ in range(stamps_each):
            with issuing:
                buffer.add(tenant.id, [memory], AT)
                issued[0] += 1
            time.sleep(0.001)  # as reads arrive: the reader and the flushes run between

    def read() -> None:  # what a read reports: its row, then the buffer's share
        try:
            while not stop.is_set():
                with issuing:
                    low = issued[0]
                accesses, _ = _row(runtime, memory)
                reported = (accesses or 0) + sum(n for n, _ in buffer.unwritten(memory, accesses))
                with issuing:
                    seen.append((low, reported, issued[0]))
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)

    stampers = [threading.Thread(target=stamp) for _ in range(4)]
    reader = threading.Thread(target=read)
    reader.start()
    for thread in stampers:
        thread.start()
    for thread in stampers:
        thread.join()
    stop.set()
    reader.join()
    buffer.close()
    # Then no read ever counted a flushed access twice or lost one in flight
    assert errors == []
    assert len(seen) > 10
    assert [s for s in seen if not s[0] <= s[1] <= s[2]] == []
    assert _row(runtime, memory)[0] == 4 * stamps_each
