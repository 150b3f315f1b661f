"""The write side's resident aggregates: a copy never hides an event, never crosses a
tenant, and never changes when its caller changes what it loaded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.persistence import StoredEvent

from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.memory import Memory
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import MemorySpec, VersionSpec
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.store.aggregates import aggregates_at, aggregates_of, load_aggregate
from palimpsest.projections.store.eventlog import SNAPSHOT_INTERVAL
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.conftest import RunDatabase, Tenant, library_writer


def _fact(runtime: Runtime, caller: Caller, text: str) -> UUID:
    body = (
        library_writer(runtime)
        .write(caller, [MemorySpec("fact", "user", None, None, text, (), None, 1.0)], batch=False)
        .body
    )
    return UUID(str(body["id"]))


def _revise(runtime: Runtime, caller: Caller, memory_id: UUID, text: str) -> None:
    revised = VersionSpec(memory_id, text, (), None, 1.0)
    library_writer(runtime).write(caller, [revised], batch=False)


def _replayed(runtime: Runtime, tenant_id: UUID, memory_id: UUID, limit: int) -> Any:
    """The memory folded from every one of its events up to ``limit``, nothing cached."""
    with tenant_transaction(runtime.log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT originator_id, originator_version, topic, state FROM {schema}.{events}"
                " WHERE originator_id = %s AND notification_id <= %s ORDER BY originator_version",
                runtime.log.datastore.schema,
            ),
            (memory_id, limit),
        )
        rows = cur.fetchall()
    aggregate = None
    for r in rows:
        event = runtime.log.mapper.to_domain_event(
            StoredEvent(r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
        )
        aggregate = event.mutate(aggregate)  # type: ignore[attr-defined]
    return aggregate


def _state(aggregate: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(aggregate).items() if k != "_pending_events"}


@pytest.fixture
def second_process(test_database: RunDatabase) -> Iterator[Runtime]:
    """Another runtime on the same database: its own pool, its own resident aggregates."""
    other = start_runtime(test_database.settings)
    yield other
    other.close()


def test_a_copy_is_brought_up_to_date_with_what_another_process_recorded(
    runtime: Runtime, tenant: Tenant, second_process: Runtime
) -> None:
    # Given a memory this process has loaded (so it holds a copy at version 2).
    caller = authenticate(runtime.log, tenant.admin.token)
    memory_id = _fact(runtime, caller, "The build takes 4 minutes")
    assert load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory").version == 2

    # When another process records a version of it.
    _revise(second_process, caller, memory_id, "The build takes 5 minutes")

    # Then this process's next load has that version, and a write decided on it
    # does not conflict (it was built on the newest version).
    loaded = load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory")
    assert loaded.version == 3
    assert len(loaded.versions) == 2
    _revise(runtime, caller, memory_id, "The build takes 6 minutes")
    assert load_aggregate(second_process.log, tenant.id, memory_id, Memory, "memory").version == 4


def test_a_copy_whose_event_the_tenant_cannot_see_is_never_an_answer(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    # Given another tenant's memory, and a copy of it filed (wrongly) under this tenant.
    theirs = authenticate(runtime.log, other_tenant.admin.token)
    memory_id = _fact(runtime, theirs, "Their secret")
    copy = load_aggregate(runtime.log, other_tenant.id, memory_id, Memory, "memory")
    aggregate_cache(runtime.log).keep(tenant.id, [copy])

    # When this tenant loads that id, the copy's anchor event is not visible to it:
    # the memory is not found, as if nothing were cached.
    with pytest.raises(NotFoundError):
        load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory")
    assert memory_id not in aggregates_of(runtime.log, tenant.id, [memory_id])


def test_changing_a_loaded_aggregate_leaves_the_next_load_unchanged(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    memory_id = _fact(runtime, caller, "Lunch is at noon")
    loaded = load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory")
    loaded.versions.clear()
    loaded.pinned = True
    again = load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory")
    assert len(again.versions) == 1 and again.pinned is False


def test_loads_from_copies_and_snapshots_equal_a_replay_of_every_event(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a memory revised past two snapshot intervals, and its positions.
    caller = authenticate(runtime.log, tenant.admin.token)
    memory_id = _fact(runtime, caller, "v0")
    for i in range(2 * SNAPSHOT_INTERVAL + 10):
        _revise(runtime, caller, memory_id, f"v{i + 1}")
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT notification_id FROM {schema}.{events} WHERE originator_id = %s"
                " ORDER BY originator_version",
                runtime.log.datastore.schema,
            ),
            (memory_id,),
        )
        positions = [int(r["notification_id"]) for r in cur.fetchall()]
    current = _replayed(runtime, tenant.id, memory_id, positions[-1])

    # The current state, from this process's copy, from a snapshot (no copy), and
    # from a copy several events behind, all equal the full replay.
    cache = aggregate_cache(runtime.log)
    assert _state(aggregates_of(runtime.log, tenant.id, [memory_id])[memory_id]) == _state(current)
    cache.evict(tenant.id)
    assert _state(aggregates_of(runtime.log, tenant.id, [memory_id])[memory_id]) == _state(current)
    cache.keep(tenant.id, [_replayed(runtime, tenant.id, memory_id, positions[-7])])
    assert _state(aggregates_of(runtime.log, tenant.id, [memory_id])[memory_id]) == _state(current)

    # As of a position before, at and after each snapshot: the prefix's replay.
    for index in (0, SNAPSHOT_INTERVAL - 2, SNAPSHOT_INTERVAL - 1, SNAPSHOT_INTERVAL, 150, 205):
        with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
            found = aggregates_at(cur, runtime.log, tenant.id, [memory_id], positions[index])
        expected = _replayed(runtime, tenant.id, memory_id, positions[index])
        assert found[memory_id].version == index + 1
        assert _state(found[memory_id]) == _state(expected)


def _events_read(cur: Any, schema: str) -> int:
    """Rows of the events table and entries of its indexes this transaction has read
    so far, whatever the plan (``pg_stat_get_xact_*``: a plain index scan counts
    against the index, a bitmap or sequential scan against the table)."""
    cur.execute(
        schema_query(
            "SELECT sum(pg_stat_get_xact_tuples_returned(r) + pg_stat_get_xact_tuples_fetched(r))"
            " AS n FROM (SELECT '{schema}.{events}'::regclass AS r UNION ALL"
            " SELECT indexrelid FROM pg_index WHERE indrelid = '{schema}.{events}'::regclass) AS t",
            schema,
        )
    )
    return int(cur.fetchone()["n"])


def test_a_known_copy_is_brought_up_to_date_by_reading_only_the_events_since(
    runtime: Runtime, tenant: Tenant, second_process: Runtime
) -> None:
    # Given a memory with a long history, this process's copy of it, and one version
    # recorded since by another process; the table's statistics up to date (a planner
    # that knows the table).
    caller = authenticate(runtime.log, tenant.admin.token)
    memory_id = _fact(runtime, caller, "v0")
    for i in range(80):
        _revise(runtime, caller, memory_id, f"v{i + 1}")
    version = load_aggregate(runtime.log, tenant.id, memory_id, Memory, "memory").version
    _revise(second_process, caller, memory_id, "the newest")
    schema = runtime.log.datastore.schema
    with runtime.database.owner_connection() as owner:
        owner.execute(schema_query("ANALYZE {schema}.{events}", schema))

    # When this process loads it again, with a planner that looks rows up in one
    # index (as a large table makes it: this one is small, and shared with other
    # tests' tenants, whose plans may also read this tenant's range of the log),
    # planning afresh.
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute("SET LOCAL enable_seqscan = off")
        cur.execute("SET LOCAL enable_bitmapscan = off")
        cur.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        before = _events_read(cur, schema)
        loaded = aggregates_at(cur, runtime.log, tenant.id, [memory_id])[memory_id]
        read = _events_read(cur, schema) - before

    # Then it has the newest version, read from its copy's last event and the one
    # since (a few index entries and rows: 8 when this was written, as with 300
    # versions), not from the memory's history (83 events).
    assert loaded.version == version + 1
    assert read <= 12, f"{read} index entries and rows of the events table read"
