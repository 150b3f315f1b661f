"""Memories indexed ahead of a backlog go into the vector index again once it has passed.

Each batch takes the newest due memories first, so what an agent writes during an
import enters the HNSW graph before the import, which then buries it (among 100,000
imported memories the HNSW search found 0.205 of the exact first ten; docs/recall.md).
The drain inserts such a memory's embedding again when the import's sweep passes it:
a new row version, which the index holds as a new entry, where an oldest-first drain
would have put it. An erasure in flight is never undone by it.
"""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.recall._relinks import BACKLOG_WAIT_S
from palimpsest.projections.recall.indexing import IndexReport, index_pending
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant, drain_until_caught_up, fact_spec, library_writer, owner_rows


def _write(runtime: Runtime, tenant: Tenant, texts: list[str]) -> list[UUID]:
    caller = authenticate(runtime.log, tenant.admin.token)
    body = library_writer(runtime).write(caller, [fact_spec(t) for t in texts], batch=True).body
    return [UUID(item["id"]) for item in body["results"]]


def _row_versions(runtime: Runtime, tenant: Tenant) -> dict[UUID, str]:
    """Each embedding row's physical version (a new one is a new index entry)."""
    query = "SELECT memory_id, xmin::text FROM {schema}.memory_embeddings WHERE tenant_id = %s"
    return {row[0]: row[1] for row in owner_rows(runtime, query, tenant.id)}


def _backlog_waited(runtime: Runtime, tenant: Tenant) -> None:
    """Date the tenant's publications back, as a backlog that waited leaves them."""
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f'UPDATE "{runtime.database.schema}".revisions SET published_at = published_at'
            " - make_interval(secs => %s) WHERE tenant_id = %s",
            (BACKLOG_WAIT_S * 4, tenant.id),
        )


def _drain(runtime: Runtime, tenant: Tenant, limit: int) -> list[IndexReport]:
    reports = []
    while (
        done := index_pending(
            runtime.log, runtime.embedder, limit=limit, tenants=lambda: [tenant.id]
        )
    ).embedded:
        reports.append(done)
    return reports


def test_a_memory_indexed_ahead_of_an_import_is_indexed_again_once_the_import_passes_it(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given an import of 16 notes, then two preferences written after it, none indexed
    imported = _write(runtime, tenant, [f"Imported note {n} of the archive" for n in range(16)])
    preferences = _write(runtime, tenant, ["Now prefers tea to coffee", "Now works on Fridays"])
    drain_until_caught_up(runtime)
    _backlog_waited(runtime, tenant)
    # When the first two batches of 4 (one newest each) are indexed: the preferences go
    # ahead of the import
    for _ in range(2):
        index_pending(runtime.log, runtime.embedder, limit=4, tenants=lambda: [tenant.id])
    ahead = _row_versions(runtime, tenant)
    assert set(preferences) <= set(ahead) and len(ahead) == 8
    # And the rest of the import after them
    reports = _drain(runtime, tenant, limit=4)
    # Then each preference was inserted again once the import had passed it; the
    # import's own rows were not
    after = _row_versions(runtime, tenant)
    assert set(after) == set(imported) | set(preferences)
    assert all(after[m] != ahead[m] for m in preferences)
    assert all(after[m] == ahead[m] for m in ahead if m in imported)
    assert sum(r.relinked for r in reports) == 2


def test_a_drain_keeping_up_inserts_nothing_again(runtime: Runtime, tenant: Tenant) -> None:
    # Given writes indexed as they come, the drain keeping up
    first = _write(runtime, tenant, ["The office moved to Leeds", "Standup is at ten"])
    drain_until_caught_up(runtime)
    assert sum(r.relinked for r in _drain(runtime, tenant, limit=4)) == 0
    before = _row_versions(runtime, tenant)
    _write(runtime, tenant, [f"Note {n}" for n in range(3)])
    drain_until_caught_up(runtime)
    # Then a batch that is not full and did not wait leaves the indexed rows alone
    assert sum(r.relinked for r in _drain(runtime, tenant, limit=4)) == 0
    after = _row_versions(runtime, tenant)
    assert all(after[m] == before[m] for m in first)


def test_an_erasure_in_flight_is_not_undone_by_a_relink(runtime: Runtime, tenant: Tenant) -> None:
    # Given a memory indexed ahead of an import
    imported = _write(runtime, tenant, [f"Imported note {n} of the archive" for n in range(7)])
    [secret] = _write(runtime, tenant, ["The door code is 4417"])
    drain_until_caught_up(runtime)
    _backlog_waited(runtime, tenant)
    index_pending(runtime.log, runtime.embedder, limit=4, tenants=lambda: [tenant.id])
    assert secret in _row_versions(runtime, tenant)
    schema = runtime.database.schema
    # When a write erasing it holds its watermark row and has deleted its vector, as an
    # erasure's transaction does (the requested revision raised first, then the rows),
    # while the drain passes it in another thread
    with runtime.database.owner_connection() as eraser:
        eraser.execute(
            f'UPDATE "{schema}".revisions SET requested = requested + 1 WHERE memory_id = %s',
            (secret,),
        )
        eraser.execute(f'DELETE FROM "{schema}".memory_embeddings WHERE memory_id = %s', (secret,))
        reports: list[Any] = []
        drain = threading.Thread(target=lambda: reports.extend(_drain(runtime, tenant, 4)))
        drain.start()
        drain.join(timeout=1.0)
        waiting = drain.is_alive()
        eraser.commit()
    drain.join(timeout=30)
    # Then the drain waited for the write, and the erased vector stayed gone
    assert waiting and not drain.is_alive()
    assert secret not in _row_versions(runtime, tenant)
    assert set(imported) <= set(_row_versions(runtime, tenant))


def test_an_erasure_arriving_during_a_relink_waits_and_deletes_what_it_inserted(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a memory indexed ahead of an import, whose insertion again will take a
    # second inside the relink's transaction (a trigger on its row alone)
    _write(runtime, tenant, [f"Imported note {n} of the archive" for n in range(7)])
    [secret] = _write(runtime, tenant, ["The door code is 4417"])
    drain_until_caught_up(runtime)
    _backlog_waited(runtime, tenant)
    index_pending(runtime.log, runtime.embedder, limit=4, tenants=lambda: [tenant.id])
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".slow_relink() RETURNS trigger LANGUAGE plpgsql'
            " AS $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER slow_relink BEFORE INSERT ON "{schema}".memory_embeddings'
            f" FOR EACH ROW WHEN (NEW.memory_id = '{secret}')"
            f' EXECUTE FUNCTION "{schema}".slow_relink()'
        )
    try:
        drain = threading.Thread(target=lambda: _drain(runtime, tenant, 4))
        drain.start()
        # When a write erasing it arrives while the relink sleeps: the requested
        # revision raised, then its vector deleted, as an erasure's transaction does
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _relinking(runtime):
            time.sleep(0.02)
        assert _relinking(runtime)
        with runtime.database.owner_connection() as eraser:
            eraser.execute(
                f'UPDATE "{schema}".revisions SET requested = requested + 1 WHERE memory_id = %s',
                (secret,),
            )
            eraser.execute(
                f'DELETE FROM "{schema}".memory_embeddings WHERE memory_id = %s', (secret,)
            )
            eraser.commit()
        drain.join(timeout=30)
    finally:
        with runtime.database.owner_connection(autocommit=True) as conn:
            conn.execute(f'DROP TRIGGER slow_relink ON "{schema}".memory_embeddings')
            conn.execute(f'DROP FUNCTION "{schema}".slow_relink()')
    # Then the erased vector is gone: the write waited for the relink's commit
    assert not drain.is_alive()
    assert secret not in _row_versions(runtime, tenant)


def _relinking(runtime: Runtime) -> bool:
    """Whether a backend sleeps in the relink's trigger."""
    rows = owner_rows(
        runtime,
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND state = 'active'",
        "%WITH passed AS%",
    )
    return bool(rows[0][0])
