"""What a drain pass reads does not grow with the table: its claim and its check that
a tenant is clean read the dirty memories (few) through their partial index, never
every revision.

Both are prepared statements, run with generic plans once a connection has run
them a few times, so their generic plans are what is checked (``EXPLAIN
(GENERIC_PLAN)``, PostgreSQL 16). Before, at 20,000 memories the claim's plan
scanned the whole table for a hash join (8 ms, every pass), and at 200,000 the
check scanned it for a dirty row it guessed a third of the rows to be (12-15 ms).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from uuid import UUID

import pytest
from psycopg import sql

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.drains.revision import CLAIM, NOTE_CLEAN, _claim, _note_clean
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.conftest import RunDatabase, Tenant, drain_until_caught_up, library_writer

PUBLISHED = 50_000
"""Published revisions the tenant holds when the statements are planned."""


@pytest.fixture
def many_published(runtime: Runtime, tenant: Tenant) -> Iterator[None]:
    """The tenant holds :data:`PUBLISHED` published revisions (rows of the watermark
    alone, removed afterwards), and ``revisions`` is analysed."""
    schema = sql.Identifier(runtime.database.schema)
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(
            "CREATE TEMPORARY TABLE synthetic AS SELECT gen_random_uuid() AS memory_id, g"
            " FROM generate_series(1, %s) g",
            (PUBLISHED,),
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.revisions (tenant_id, memory_id, requested, published)"
                " SELECT %s, memory_id, g, g FROM synthetic"
            ).format(schema),
            (tenant.id,),
        )
        conn.execute(sql.SQL("ANALYZE {}.revisions").format(schema))
        try:
            yield
        finally:
            conn.execute(
                sql.SQL(
                    "DELETE FROM {}.revisions WHERE tenant_id = %s"
                    " AND memory_id IN (SELECT memory_id FROM synthetic)"
                ).format(schema),
                (tenant.id,),
            )


def _generic_plan(runtime: Runtime, tenant_id: UUID, template: str) -> str:
    """The plan PostgreSQL keeps for ``template`` once prepared, run as the tenant."""
    numbered, n = template, 0
    while "%s" in numbered:
        n += 1
        numbered = numbered.replace("%s", f"${n}", 1)
    statement = schema_sql(numbered, runtime.database.schema)
    with tenant_transaction(runtime.log.datastore, tenant_id, commit=False) as cur:
        if cur.connection.info.server_version < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16")
        cur.execute(sql.SQL("EXPLAIN (GENERIC_PLAN) {}").format(statement))
        return "\n".join(str(next(iter(row.values()))) for row in cur.fetchall())


@pytest.mark.usefixtures("many_published")
@pytest.mark.parametrize(("name", "template"), [("claim", CLAIM), ("clean check", NOTE_CLEAN)])
def test_a_pass_reads_the_dirty_memories_not_every_revision(
    runtime: Runtime, tenant: Tenant, name: str, template: str
) -> None:
    plan = _generic_plan(runtime, tenant.id, template)
    assert "Seq Scan on revisions" not in plan, f"{name}:\n{plan}"
    assert "revisions_dirty" in plan, f"{name}:\n{plan}"


def _positions(runtime: Runtime, tenant_id: UUID) -> tuple[int, int]:
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            sql.SQL(
                "SELECT marked_position, drained_position FROM {}.revision_tenants"
                " WHERE tenant_id = %s"
            ).format(sql.Identifier(runtime.database.schema)),
            (tenant_id,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_a_tenant_is_recorded_clean_only_once_nothing_of_it_is_dirty(
    runtime: Runtime, tenant: Tenant
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    note = MemorySpec("note", "user", None, None, "A dirty memory", (), None, 1.0)
    library_writer(runtime).write(caller, [note], batch=False)
    marked, drained = _positions(runtime, tenant.id)
    assert drained < marked

    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        cur.execute(schema_sql(NOTE_CLEAN, runtime.database.schema), (marked, tenant.id))
    assert _positions(runtime, tenant.id) == (marked, drained)  # one memory is dirty

    drain_until_caught_up(runtime)  # claims and publishes it, then records the tenant clean
    assert _positions(runtime, tenant.id)[1] >= marked


@pytest.fixture
def one_connection(test_database: RunDatabase) -> Iterator[Runtime]:
    """Another runtime on the same database, with a pool of one connection: every
    statement it sends a second time is prepared on that connection, and PostgreSQL
    keeps one plan for it there, whichever tenant it was made in."""
    settings = test_database.settings.model_copy(update={"db_pool_size": 1, "db_max_overflow": 0})
    own = start_runtime(settings)
    yield own
    own.close()


def _checked_clean(log: EventLog, tenant_id: UUID) -> None:
    """Run the drains' clean check for the tenant, as they send it."""
    _note_clean(log, tenant_id, 0)


def _claimed_none(log: EventLog, tenant_id: UUID) -> None:
    """Run the drains' claim for the tenant, as they send it (nothing is dirty)."""
    assert _claim(log, tenant_id, 100, 10.0) == []


@pytest.mark.usefixtures("many_published")
@pytest.mark.parametrize(
    ("name", "run"), [("claim", _claimed_none), ("clean check", _checked_clean)]
)
def test_a_pass_costs_about_the_same_in_a_tenant_holding_most_of_the_table(
    runtime: Runtime,
    one_connection: Runtime,
    tenant: Tenant,
    name: str,
    run: Callable[[EventLog, UUID], None],
) -> None:
    """A plan kept for every tenant, made in a small one, cost the one holding most of
    ``revisions`` 2-5 ms a statement (0.1 ms in a small tenant), on every pass of the
    drains (the planner folds the tenant into its estimates): such a statement is
    planned for its tenant."""
    small = create_tenant(runtime.log, f"small, for the {name}").tenant_id
    log = one_connection.log
    for _ in range(10):  # any plan PostgreSQL keeps on the connection is the small tenant's
        run(log, small)
    took: dict[UUID, list[float]] = {small: [], tenant.id: []}
    for _ in range(60):  # interleaved: the machine's speed moves
        for tenant_id, times in took.items():
            started = time.perf_counter()
            run(log, tenant_id)
            times.append(time.perf_counter() - started)
    big, other = statistics.median(took[tenant.id]), statistics.median(took[small])
    assert big < 3 * other, f"{name}: {1000 * big:.2f} ms against {1000 * other:.2f} ms"
