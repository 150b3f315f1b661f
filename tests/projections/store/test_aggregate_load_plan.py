"""Loading an aggregate reads its own events by their key, whatever the events table's
statistics say: a store just written in bulk has none (autovacuum skips analysing a
table it cannot lock at once, and every write locks the events table), and the planner
then read every event of the tenant in the ``(tenant_id, notification_id)`` index to
load one memory."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store import aggregates
from palimpsest.projections.store.aggregates import CURRENT, aggregates_at, loaded_with
from palimpsest.projections.store.queued import QueuingCursor
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.tenancy import queued_transaction, tenant_transaction
from tests.conftest import fact_spec, fresh_database, library_writer

_MEMORIES = 1_500
"""Enough events that a plan reading the tenant's index shows, few enough to write fast."""


@pytest.fixture(scope="module")
def unanalysed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Runtime, UUID, UUID]]:
    """A store whose events table has never been analysed (autovacuum kept off it), with
    one tenant of :data:`_MEMORIES` memories; the runtime, the tenant and one memory."""
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        try:
            with own.database.owner_connection(autocommit=True) as conn:
                conn.execute(
                    f'ALTER TABLE "{own.database.schema}".{EVENTS_TABLE}'
                    " SET (autovacuum_enabled = false)"
                )
            issued = create_tenant(own.log, "bulk")
            caller = authenticate(own.log, issued.token)
            writer = library_writer(own)
            specs = [fact_spec(f"imported fact {i}") for i in range(_MEMORIES)]
            body = writer.write(caller, specs, batch=True).body
            first = UUID(str(body["results"][0]["id"]))
            yield own, issued.tenant_id, first
        finally:
            own.close()


def _plan(runtime: Runtime, tenant_id: UUID, memory_id: UUID, *, by_key: bool) -> str:
    """The executed plan of the load of ``memory_id`` (not known to this process), as
    :func:`loaded_with` sends it, or without its setting first."""
    query, params = aggregates._load_statement(runtime.log, [memory_id], {}, CURRENT)
    with queued_transaction(runtime.log.datastore, tenant_id, commit=False) as cur:
        if by_key:
            cur.execute(aggregates._BY_KEY_ONLY)
        cur.execute(b"EXPLAIN (ANALYZE, FORMAT TEXT) " + query, params)
        answer = cur.answer()
    return "\n".join(str(row[0]) for row in answer.rows)


def test_without_statistics_a_plan_left_to_the_planner_reads_the_whole_tenant(
    unanalysed: tuple[Runtime, UUID, UUID],
) -> None:
    """The condition the load guards against holds in this store (else the next test
    would prove nothing)."""
    runtime, tenant_id, memory_id = unanalysed
    assert "tenant_id_notification_id" in _plan(runtime, tenant_id, memory_id, by_key=False)


def test_a_load_reads_the_memorys_events_by_their_key_alone(
    unanalysed: tuple[Runtime, UUID, UUID],
) -> None:
    runtime, tenant_id, memory_id = unanalysed
    plan = _plan(runtime, tenant_id, memory_id, by_key=True)
    assert "tenant_id_notification_id" not in plan
    assert "Bitmap" not in plan


def test_loaded_with_sends_the_setting_and_restores_it_for_what_follows(
    unanalysed: tuple[Runtime, UUID, UUID],
) -> None:
    runtime, tenant_id, memory_id = unanalysed

    def settings_after(cur: QueuingCursor) -> Any:
        cur.execute(
            b"SELECT current_setting('palimpsest.enable_bitmapscan', true),"
            b" current_setting('enable_bitmapscan')"
        )
        return cur.answer()

    loaded, after = loaded_with(runtime.log, tenant_id, [memory_id], settings_after)
    assert memory_id in loaded
    # Set off for the load (the previous value kept aside), then as before.
    assert after.rows == [("on", "on")]


def test_a_load_on_an_open_cursor_sets_the_same_and_restores_it(
    unanalysed: tuple[Runtime, UUID, UUID],
) -> None:
    """The observations listing loads a page's aggregates on its own transaction's
    cursor (:func:`aggregates_at`): planned by key as well, and what the transaction
    runs next planned as before."""
    runtime, tenant_id, memory_id = unanalysed
    with tenant_transaction(runtime.log.datastore, tenant_id, commit=False) as cur:
        loaded = aggregates_at(cur, runtime.log, tenant_id, [memory_id])
        cur.execute(
            "SELECT current_setting('palimpsest.enable_bitmapscan', true) AS kept,"
            " current_setting('enable_bitmapscan') AS now"
        )
        row = cur.fetchone()
    assert memory_id in loaded
    assert row is not None and (row["kept"], row["now"]) == ("on", "on")
