"""Rebuild every read model from position 0, while the service keeps serving.

1. Create shadow tables (``rebuild_<table>``) shaped exactly like the live
   ones: columns, defaults, constraints, indexes, row-level security,
   policies and grants. Then, in one exported snapshot, worker processes
   replay every tenant's log into memory
   (:class:`~palimpsest.projections.views.read_models.TenantReadModels`) and copy the rows
   into the shadows. Reads and writes go on meanwhile.
2. In one short transaction, lock the log against writers (``SHARE``:
   readers go on) and the read models against drains, let the workers
   replay what was written since the snapshot (re-copying the shadow rows of
   the tenants that wrote), then drop each live table and rename its shadow
   into its place. Readers see the old tables until the commit and the new
   ones after it; a read waiting on the swap's lock resolves the table by
   name again and reads the new one. There is no moment with half.

Every rebuilt memory is published at its requested revision, so the
watermark is exact after the swap. An interrupted rebuild drops its shadow
tables (or the next run does): the live tables are replaced by the final
transaction or not at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import Mapper
from eventsourcing.utils import get_topic
from psycopg import sql

from palimpsest.domain.memory import Memory
from palimpsest.projections.history._replay_mapper import replay_mapper
from palimpsest.projections.history._replay_workers import (
    SPLIT_FROM,
    WorkerPlan,
    WorkerPool,
    default_workers,
    replay_units,
    workers_for,
)
from palimpsest.projections.history.log_scan import Progress, log_head, replay_tenant, tenant_ids
from palimpsest.projections.store.database import Database
from palimpsest.projections.store.schema import EVENTS_TABLE, SNAPSHOTS_TABLE
from palimpsest.projections.views.read_models import TABLES, TenantReadModels

__all__ = [
    "RebuildReport",
    "SPLIT_FROM",
    "rebuild",
    "rebuild_tenant",
    "tenant_sizes",
]

_log = logging.getLogger(__name__)
_LIVE_TABLES = (*(t.name for t in TABLES), SNAPSHOTS_TABLE)
_OWNERS = {**{t.name: t.owner for t in TABLES}, SNAPSHOTS_TABLE: "originator_id"}
"""Each live table's column naming the memory whose part holds a row (None: part 0)."""


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did."""

    tenants: int
    events: int
    position: int
    caught_up: int
    """Tenants that wrote while the snapshot was replayed, caught up under the swap lock."""
    seconds: float
    swap_seconds: float
    workers: int
    unprojectable: int = 0
    """Memories rebuilt quarantined: an event of theirs cannot be read, or the
    projection raises on them (``palimpsest verify`` lists them)."""
    split: int = 0
    """Tenants replayed in parts, side by side (see ``rebuild``)."""


def _shadow(table: str) -> str:
    return f"rebuild_{table}"


def _ident(schema: str, table: str) -> sql.Composed:
    return sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(table))


def _create_shadows(cur: psycopg.Cursor[Any], schema: str) -> None:
    """Create each shadow like its live table, with its security as well."""
    for table in _LIVE_TABLES:
        live, shadow = _ident(schema, table), _ident(schema, _shadow(table))
        cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(shadow))
        # Indexes come after the copy (_index_shadows): building one is cheaper
        # than maintaining it row by row.
        cur.execute(
            sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)").format(
                shadow, live
            )
        )
        cur.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = %s::regclass",
            (live.as_string(cur),),
        )
        row = cur.fetchone()
        assert row is not None
        if row[0]:
            cur.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(shadow))
        if row[1]:
            cur.execute(sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(shadow))
        cur.execute(
            "SELECT policyname, permissive, roles, cmd, qual, with_check FROM pg_policies"
            " WHERE schemaname = %s AND tablename = %s",
            (schema, table),
        )
        for name, permissive, roles, command, qual, check in cur.fetchall():
            statement = sql.SQL("CREATE POLICY {} ON {} AS {} FOR {} TO {}").format(
                sql.Identifier(name),
                shadow,
                sql.SQL(permissive),
                sql.SQL(command),
                sql.SQL(", ").join(
                    sql.SQL("public") if r == "public" else sql.Identifier(r) for r in roles
                ),
            )
            if qual is not None:
                statement += sql.SQL(" USING ({})").format(sql.SQL(qual))
            if check is not None:
                statement += sql.SQL(" WITH CHECK ({})").format(sql.SQL(check))
            cur.execute(statement)
        cur.execute(
            "SELECT grantee, privilege_type FROM information_schema.role_table_grants"
            " WHERE table_schema = %s AND table_name = %s AND grantee <> current_user",
            (schema, table),
        )
        for grantee, privilege in cur.fetchall():
            cur.execute(
                sql.SQL("GRANT {} ON {} TO {}").format(
                    sql.SQL(privilege), shadow, sql.Identifier(grantee)
                )
            )


def _index_shadows_side_by_side(database: Database, schema: str) -> None:
    """Give every shadow its keys, indexes and statistics on two connections at once,
    each taking every other table: PostgreSQL builds an index on one core."""
    halves = (_LIVE_TABLES[0::2], _LIVE_TABLES[1::2])

    def build(tables: tuple[str, ...]) -> None:
        with (
            database.owner_connection(autocommit=True) as conn,
            conn.transaction(),
            conn.cursor() as cur,
        ):
            # Sorting for the index builds in memory rather than on disk.
            cur.execute("SET LOCAL maintenance_work_mem = '256MB'")
            _index_shadows(cur, schema, tables)

    with ThreadPoolExecutor(len(halves)) as pool:
        for built in [pool.submit(build, half) for half in halves]:
            built.result()


def _index_shadows(cur: psycopg.Cursor[Any], schema: str, tables: tuple[str, ...]) -> None:
    """Give each of the ``tables``' shadows its live table's keys and indexes, then
    statistics."""
    for table in tables:
        live, shadow = _ident(schema, table), _ident(schema, _shadow(table))
        cur.execute(
            "SELECT pg_get_indexdef(i.indexrelid), pg_get_constraintdef(c.oid) FROM pg_index i"
            " LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.contype IN ('p', 'u')"
            " WHERE i.indrelid = %s::regclass",
            (live.as_string(cur),),
        )
        for index, constraint in cur.fetchall():
            if constraint is not None:
                cur.execute(sql.SQL("ALTER TABLE {} ADD {}").format(shadow, sql.SQL(constraint)))
            else:
                unique = "UNIQUE " if index.startswith("CREATE UNIQUE ") else ""
                cur.execute(
                    sql.SQL("CREATE {}INDEX ON {} USING {}").format(
                        sql.SQL(unique), shadow, sql.SQL(index.split(" USING ", 1)[1])
                    )
                )
        cur.execute(sql.SQL("ANALYZE {}").format(shadow))


def _drop_shadows(cur: psycopg.Cursor[Any], schema: str) -> None:
    for table in _LIVE_TABLES:
        cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(_ident(schema, _shadow(table))))


def _index_shapes(cur: psycopg.Cursor[Any], schema: str, table: str) -> dict[str, str]:
    """Return each index's name by its shape (uniqueness, method, columns, predicate)."""
    cur.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
        (schema, table),
    )
    return {
        ("UNIQUE " if " UNIQUE " in f" {d} " else "") + d.split(" USING ", 1)[1]: name
        for name, d in cur.fetchall()
    }


def _swap_tables(cur: psycopg.Cursor[Any], schema: str) -> None:
    """Replace every live read-model table with its shadow, keeping index names."""
    for table in _LIVE_TABLES:
        names = _index_shapes(cur, schema, table)
        cur.execute(sql.SQL("DROP TABLE {}").format(_ident(schema, table)))
        cur.execute(
            sql.SQL("ALTER TABLE {} RENAME TO {}").format(
                _ident(schema, _shadow(table)), sql.Identifier(table)
            )
        )
        for shape, name in _index_shapes(cur, schema, table).items():
            if shape in names and names[shape] != name:
                cur.execute(
                    sql.SQL("ALTER INDEX {} RENAME TO {}").format(
                        _ident(schema, name), sql.Identifier(names[shape])
                    )
                )
    cur.execute(
        sql.SQL("UPDATE {} SET drained_position = marked_position").format(
            _ident(schema, "revision_tenants")
        )
    )


_SWAP_LOCK_TIMEOUT = "200ms"
"""How long the swap waits for readers before stepping back and trying again.

Well below ``deadlock_timeout`` (1 s by default): a reader that holds one
table and waits for another the swap holds is let through (the swap gives
way) before the deadlock detector could cancel the reader instead."""


def _lock_out_writers_and_drains(conn: psycopg.Connection[Any], schema: str) -> None:
    """Lock the log against writers and the read models against drains; reads go on.

    The log first: a writer takes it before any read model, so none is left
    holding one. Then beliefs before revisions, the order drains take them.
    A short lock timeout (retried) keeps the rebuild from ever being the
    reason a drain deadlocks.
    """
    order = (EVENTS_TABLE, "beliefs", "revisions", *_LIVE_TABLES, "revision_tenants")
    tables = list(dict.fromkeys(order))
    while True:
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(
                    sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(_SWAP_LOCK_TIMEOUT))
                )
                for table in tables:
                    mode = "SHARE" if table == EVENTS_TABLE else "EXCLUSIVE"
                    cur.execute(
                        sql.SQL("LOCK TABLE {} IN {} MODE").format(
                            _ident(schema, table), sql.SQL(mode)
                        )
                    )
                return
        except psycopg.errors.LockNotAvailable:
            time.sleep(0.05)


def _swap_when_readers_allow(conn: psycopg.Connection[Any], schema: str) -> None:
    """Take every live table exclusively (briefly blocking reads) and swap.

    Readers take their tables one statement at a time, in their own order,
    so the swap takes all of them in one savepoint with a short lock timeout
    and retries until it gets them all at once.
    """
    tables = sql.SQL(", ").join(_ident(schema, t) for t in _LIVE_TABLES)
    while True:
        try:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(
                    sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(_SWAP_LOCK_TIMEOUT))
                )
                cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(tables))
                _swap_tables(cur, schema)
                return
        except psycopg.errors.LockNotAvailable:
            time.sleep(0.05)


def _copy_tenant(
    cur: psycopg.Cursor[Any],
    schema: str,
    mapper: Mapper[UUID],
    models: TenantReadModels,
    into: Callable[[str], str] = _shadow,
) -> None:
    """Write a tenant's rebuilt rows, and its memories' snapshots, into the shadow tables
    (or the tables ``into`` names)."""
    statement = sql.SQL(
        "COPY {} (tenant_id, originator_id, originator_version, topic, state) FROM STDIN"
    ).format(_ident(schema, into(SNAPSHOTS_TABLE)))
    with cur.copy(statement) as copy:
        for (memory_id, version), state in models.snapshots.items():
            snapshot = Snapshot(
                originator_id=memory_id,
                originator_version=version,
                timestamp=Snapshot.create_timestamp(),
                topic=get_topic(Memory),
                state=state,
            )
            stored = mapper.to_stored_event(snapshot)
            copy.write_row((models.tenant_id, memory_id, version, stored.topic, stored.state))
    for spec in TABLES:
        columns = ("tenant_id", *spec.columns)
        shadow = _ident(schema, into(spec.name))
        statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
            shadow, sql.SQL(", ").join(map(sql.Identifier, columns))
        )
        types = _column_types(cur, shadow, columns)
        with cur.copy(statement) as copy:
            # Typed: a dict in a jsonb column is dumped by the jsonb dumper itself,
            # unwrapped (the bytes psycopg's Jsonb gives).
            copy.set_types(types)
            write_row, tenant_id = copy.write_row, models.tenant_id
            for key, values in models.table_rows(spec.name):
                write_row((tenant_id, *key, *values))


def _column_types(
    cur: psycopg.Cursor[Any], table: sql.Composed, columns: tuple[str, ...]
) -> list[str]:
    """Return the types of ``columns`` of ``table``, for a binary COPY."""
    cur.execute(
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = %s::regclass AND attnum > 0",
        (table.as_string(cur),),
    )
    types = dict(cur.fetchall())
    return [types[c] for c in columns]


@dataclass(frozen=True)
class _RebuildTask:
    """A worker's part of a rebuild: copy its tenants' rows into the shadows."""

    schema: str

    def after_replay(
        self, conn: psycopg.Connection[Any], mapper: Mapper[UUID], models: list[TenantReadModels]
    ) -> int:
        """Copy the tenants' rows; return how many were replayed in parts (counted by
        their part 0)."""
        with conn.cursor() as cur:
            for tenant in models:
                _copy_tenant(cur, self.schema, mapper, tenant)
        return sum(t.part is not None and t.part.holds_tenant_rows for t in models)

    def after_catch_up(
        self, conn: psycopg.Connection[Any], mapper: Mapper[UUID], changed: list[TenantReadModels]
    ) -> int:
        with conn.cursor() as cur:
            for tenant in changed:
                _delete_copied(cur, self.schema, tenant)
                _copy_tenant(cur, self.schema, mapper, tenant)
        return sum(t.part is None or t.part.holds_tenant_rows for t in changed)


def _delete_copied(cur: psycopg.Cursor[Any], schema: str, tenant: TenantReadModels) -> None:
    """Delete from the shadows what ``_copy_tenant`` copied of the tenant (of its part)."""
    part = tenant.part
    for table in _LIVE_TABLES:
        statement = sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(
            _ident(schema, _shadow(table))
        )
        owner = _OWNERS[table]
        if part is not None and owner is not None:
            statement += sql.SQL(" AND ") + part.owned(owner)
        elif part is not None and not part.holds_tenant_rows:
            continue
        cur.execute(statement, (tenant.tenant_id,))


def tenant_sizes(cur: psycopg.Cursor[Any], schema: str) -> dict[UUID, int]:
    """Return every tenant that has written, with its number of events (in the snapshot)."""
    sizes = dict.fromkeys(tenant_ids(cur, schema), 0)
    cur.execute(
        sql.SQL("SELECT tenant_id, count(*) FROM {} GROUP BY tenant_id").format(
            _ident(schema, EVENTS_TABLE)
        )
    )
    sizes.update({row[0]: row[1] for row in cur.fetchall() if row[0] in sizes})
    return sizes


def _replay_into_shadows(
    conn: psycopg.Connection[Any],
    database: Database,
    pool: WorkerPool,
    progress: Progress,
    split_from: int,
) -> tuple[set[UUID], int]:
    """In one exported snapshot, have the workers replay every tenant into the
    shadows (``progress.total`` becomes the snapshot's head). Returns the tenants
    replayed, and how many of them were replayed in parts."""
    schema = database.schema
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("SELECT pg_export_snapshot()")
        exported = cur.fetchone()
        assert exported is not None
        head = log_head(cur, schema)
        progress.total = head
        sizes = tenant_sizes(cur, schema)
        pool.assign(
            WorkerPlan(database.owner_conninfo(), schema, exported[0], _RebuildTask(schema))
        )
        # The snapshot must outlive the workers' SET TRANSACTION SNAPSHOT: this
        # transaction stays open until they have replayed.
        units = replay_units(sizes, pool.workers, split_from=split_from)
        results = pool.run([("replay", head)] * pool.workers, "replayed", progress.advance, units)
    return set(sizes), sum(sum(worker) for worker in results)


def rebuild(
    database: Database,
    *,
    workers: int | None = None,
    split_from: int = SPLIT_FROM,
    report: Callable[[str], None] = lambda _: None,
) -> RebuildReport:
    """Rebuild every read model of every tenant from the log and swap them in.

    ``workers`` replay tenants in parallel (default: one per core): one in a
    thread of this process, the others in processes. A tenant of at least
    ``split_from`` events that holds more than a worker's share of the store is
    replayed in parts, side by side
    (:mod:`~palimpsest.projections.views.read_model_parts`).

    Raises:
        KeyboardInterrupt: passed on after dropping the shadow tables; the live
            read models are untouched unless the swap had committed.
    """
    started = time.monotonic()
    schema = database.schema
    progress = Progress("rebuild", 0, report)
    with database.owner_connection(autocommit=True) as conn:
        with conn.transaction(), conn.cursor() as cur:
            sizes_now = tenant_sizes(cur, schema)
        # Workers start first: their imports overlap the preparation below.
        wanted = workers or default_workers()
        pool = WorkerPool(workers_for(sizes_now, wanted, split_from=split_from))
        pool.start()
        try:
            with conn.transaction(), conn.cursor() as cur:
                _create_shadows(cur, schema)
            known, split = _replay_into_shadows(conn, database, pool, progress, split_from)
            report(progress.line())
            report(f"rebuild: replayed and copied in {time.monotonic() - started:.1f} s")
            _index_shadows_side_by_side(database, schema)
            report(f"rebuild: keys, indexes and statistics at {time.monotonic() - started:.1f} s")
            swap_started = time.monotonic()
            with conn.transaction(), conn.cursor() as cur:
                _lock_out_writers_and_drains(conn, schema)
                final = log_head(cur, schema)
                new = [t for t in tenant_ids(cur, schema) if t not in known]
                commands = [("catch_up", final, new if i == 0 else []) for i in range(pool.workers)]
                caught_up = sum(pool.run(commands, "caught_up"))
                _swap_when_readers_allow(conn, schema)
            swap_seconds = time.monotonic() - swap_started
        except BaseException:
            # Interrupted (Ctrl-C) or failed: the live tables were not touched unless
            # the swap committed; the shadows go, so the next run starts clean. The
            # workers go first: one still copying would hold a shadow's lock.
            pool.stop(at_once=True)
            try:
                with conn.transaction(), conn.cursor() as cur:
                    _drop_shadows(cur, schema)
            except psycopg.Error as e:  # the next run drops them
                _log.warning("rebuild left its shadow tables", extra={"error": str(e)})
            raise
        finally:
            pool.stop()
        unprojectable = _count_unprojectable(conn, schema)
    return RebuildReport(
        tenants=len(known) + len(new),
        events=progress.done,
        position=final,
        caught_up=caught_up,
        seconds=time.monotonic() - started,
        swap_seconds=swap_seconds,
        workers=pool.workers,
        unprojectable=unprojectable,
        split=split,
    )


def rebuild_tenant(
    database: Database, tenant_id: UUID, *, report: Callable[[str], None] = lambda _: None
) -> RebuildReport:
    """Rebuild one tenant's read models from the log, in place, in one transaction.

    The log is locked against writers (``SHARE``) and the read models against
    drains while the tenant is replayed in this process and its rows replaced:
    every tenant's writes wait that long (a tenant's replay, not the store's),
    reads go on and see the old rows until the commit.
    """
    started = time.monotonic()
    schema = database.schema
    progress = Progress("rebuild", 0, report)
    models = TenantReadModels(tenant_id)
    with database.owner_connection(autocommit=True) as conn, conn.transaction():
        _lock_out_writers_and_drains(conn, schema)
        with conn.cursor() as cur:
            final = log_head(cur, schema)
            progress.total = final
        mapper = replay_mapper()
        replay_tenant(conn, schema, mapper, models, upto=final, progress=progress)
        with conn.cursor() as cur:
            for table in _LIVE_TABLES:
                cur.execute(
                    sql.SQL("DELETE FROM {} WHERE tenant_id = %s").format(_ident(schema, table)),
                    (tenant_id,),
                )
            _copy_tenant(cur, schema, mapper, models, into=lambda table: table)
        unprojectable = _count_unprojectable(conn, schema, tenant_id)
    seconds = time.monotonic() - started
    return RebuildReport(
        tenants=1,
        events=progress.done,
        position=final,
        caught_up=0,
        seconds=seconds,
        swap_seconds=seconds,
        workers=0,
        unprojectable=unprojectable,
    )


def _count_unprojectable(
    conn: psycopg.Connection[Any], schema: str, tenant_id: UUID | None = None
) -> int:
    """Return how many memories (of every tenant, or of one) are quarantined."""
    query = sql.SQL("SELECT count(*) FROM {} WHERE unprojectable_at = requested").format(
        _ident(schema, "revisions")
    )
    if tenant_id is not None:
        query += sql.SQL(" AND tenant_id = {}").format(sql.Literal(str(tenant_id)))
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0
