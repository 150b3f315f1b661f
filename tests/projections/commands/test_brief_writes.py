"""Brief writes (``palimpsest.projections.store.brief_waits``): a write that would wait longer
than its limit for a lock, or at all for a group commit, writes nothing and says so,
and never makes another write wait less or fail with it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.brief_waits import WouldWaitError, brief_limit, briefly
from palimpsest.projections.store.eventlog import GROUPS_AHEAD, GroupCommit
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.conftest import RunDatabase, Tenant, count_events, fact_spec, library_writer, wait_until
from tests.projections.commands.test_group_commit import (
    _started,
    _waiting_on_lock,
)


def test_a_brief_write_gives_up_on_a_held_lock_in_its_time_and_writes_nothing(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    created = count_events(runtime, tenant, "MemoryCreated")
    schema = runtime.database.schema
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        started = time.monotonic()
        with briefly(0.05), pytest.raises(WouldWaitError):
            writer.write(caller, [fact_spec("given up on the lock")], batch=False)
        took = time.monotonic() - started
        # Its own limit, not the database's (10 s), and not tried again (0.5 s apart).
        assert 0.05 <= took < 0.45, took
        assert brief_limit() is None

        # A write that is not brief waits as long as it must, on the same pool.
        outcomes: dict[str, Any] = {}
        patient = _started(
            outcomes,
            "patient",
            lambda: writer.write(caller, [fact_spec("waited for the lock")], batch=False),
        )
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the patient write waits for the table")
        time.sleep(0.3)  # longer than any brief limit here
        assert "patient" not in outcomes
        holder.commit()
    patient.join(30)

    assert outcomes["patient"].status_code == 201
    # The brief write left nothing in the log: only the patient one is there.
    assert count_events(runtime, tenant, "MemoryCreated") == created + 1


@pytest.mark.parametrize("ahead", [0, GROUPS_AHEAD], ids=["being-led", "sent-ahead"])
def test_a_brief_write_never_joins_a_group_under_way(
    runtime: Runtime, tenant: Tenant, ahead: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither one being led (it would wait for it) nor one sent ahead (it would lead
    the next, and wait for the table behind it)."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    schema, group = runtime.database.schema, runtime.log.group
    monkeypatch.setattr(group, "ahead", ahead)
    created = count_events(runtime, tenant, "MemoryCreated")
    outcomes: dict[str, Any] = {}
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        leader = _started(
            outcomes, "leader", lambda: writer.write(caller, [fact_spec("leads")], batch=False)
        )
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the leader waits for the table")

        started = time.monotonic()
        with briefly(5.0), pytest.raises(WouldWaitError):
            writer.write(caller, [fact_spec("would have queued")], batch=False)
        # At once: it did not wait for the group, however long its limit.
        assert time.monotonic() - started < 1.0
        assert group.queued == 0
        holder.commit()
    leader.join(30)

    assert outcomes["leader"].status_code == 201
    assert count_events(runtime, tenant, "MemoryCreated") == created + 1


@pytest.mark.slow
def test_a_brief_leader_commits_alone_and_the_writes_queued_behind_it_still_commit(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its short lock wait is its own: it waits for no write being built, and the
    writes that queued while it led commit in the next group, which waits for the
    lock as long as it must."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    schema, group = runtime.database.schema, runtime.log.group
    monkeypatch.setattr(group, "ahead", 0)  # the brief write keeps the lead: writes queue
    group.sizes.clear()
    created = count_events(runtime, tenant, "MemoryCreated")
    outcomes: dict[str, Any] = {}

    def brief_write() -> Any:
        with briefly(0.3):
            return writer.write(caller, [fact_spec("brief leader")], batch=False)

    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        with _window(group, 30.0), group.building():  # a write being built: a group waits
            threads = [_started(outcomes, "brief", brief_write)]
            wait_until(lambda: _waiting_on_lock(runtime), 10, "the brief write leads, at once")
            threads += [
                _started(outcomes, name, partial(writer.write, caller, [spec], batch=False))
                for name, spec in (("a", fact_spec("queued a")), ("b", fact_spec("queued b")))
            ]
            wait_until(lambda: group.queued == 2, 10, "two writes queue behind the brief one")
            wait_until(lambda: "brief" in outcomes, 10, "the brief write gives up")
        # The next group has the lock's whole wait, not the brief one's (with its,
        # three attempts would have failed by now).
        wait_until(lambda: _waiting_on_lock(runtime), 10, "the next group waits for the table")
        time.sleep(3.0)
        assert set(outcomes) == {"brief"}
        holder.commit()
    for thread in threads:
        thread.join(30)

    assert isinstance(outcomes["brief"], WouldWaitError)
    assert outcomes["a"].status_code == 201 and outcomes["b"].status_code == 201
    assert list(group.sizes) == [2]
    assert count_events(runtime, tenant, "MemoryCreated") == created + 2


def test_a_brief_write_with_an_idempotency_key_leaves_the_key_free(
    runtime: Runtime, tenant: Tenant
) -> None:
    """The write that reads its answer inside the transaction (psycopg's pipeline) gives
    up in time too, and records nothing: the key is still the next request's."""
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    key = (f"key-{time.monotonic_ns()}", "sha256:one")
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{runtime.database.schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        started = time.monotonic()
        with briefly(0.05), pytest.raises(WouldWaitError):
            writer.write(caller, [fact_spec("keyed")], batch=False, idempotency=key)
        assert time.monotonic() - started < 0.45
        holder.rollback()
    first = writer.write(caller, [fact_spec("keyed")], batch=False, idempotency=key)
    again = writer.write(caller, [fact_spec("keyed")], batch=False, idempotency=key)
    assert (first.status_code, first.replayed) == (201, False)
    assert (again.replayed, again.body) == (True, first.body)


def test_a_brief_write_that_meets_a_lost_connection_is_not_tried_again_here(
    test_database: RunDatabase, runtime: Runtime, tenant: Tenant
) -> None:
    """Its pool's one connection ended under it (PostgreSQL restarted, a proxy
    closed it): at once, not after the retry's pause, and nothing written."""
    own = start_runtime(
        test_database.settings.model_copy(update={"db_pool_size": 1, "db_max_overflow": 0})
    )
    try:
        caller = authenticate(own.log, tenant.admin.token)
        writer = library_writer(own)
        writer.write(caller, [fact_spec("opens the connection")], batch=False)
        with own.log.datastore.get_connection() as conn:
            pid = conn.info.backend_pid
        with runtime.database.owner_connection(autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        created = count_events(runtime, tenant, "MemoryCreated")
        started = time.monotonic()
        with briefly(0.05), pytest.raises(WouldWaitError):
            writer.write(caller, [fact_spec("met a lost connection")], batch=False)
        assert time.monotonic() - started < 0.45
        assert count_events(runtime, tenant, "MemoryCreated") == created
        # Not brief, the same write is tried again and commits.
        assert writer.write(caller, [fact_spec("tried again")], batch=False).status_code == 201
    finally:
        own.close()


@contextmanager
def _window(group: GroupCommit, window_s: float) -> Iterator[None]:
    """Within the block, a group waits up to ``window_s`` for writes being built."""
    before, group.window_s = group.window_s, window_s
    try:
        yield
    finally:
        group.window_s = before


def test_a_brief_wait_must_be_positive() -> None:
    for limit in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="positive"), briefly(limit):
            pass
    assert brief_limit() is None


def test_the_brief_limit_is_the_blocks_own_thread_and_context() -> None:
    seen: list[float | None] = []
    with briefly(0.02):
        other = threading.Thread(target=lambda: seen.append(brief_limit()))
        other.start()
        other.join()
        seen.append(brief_limit())
    assert seen == [None, 0.02]
