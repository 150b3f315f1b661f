"""Verify: recompute every read model at one pinned log position and compare.

One ``REPEATABLE READ`` transaction pins the log head and reads the live
tables in the same snapshot (the dependency rows and requested revisions
are written in the transaction of the events they index, so they must
match exactly; a requested revision may only be higher, see
``_verify_tenant``). Every row and every log-derived field is compared, for
every tenant. Beliefs are compared for memories whose published revision
has reached the requested one; a memory still pending revision must show
a belief row exactly at its published revision (none before its first).

A memory the projection fails on (the drain quarantines it) is not a
divergence: the read models cannot hold its belief. Verify lists it in
:attr:`VerifyReport.unprojectable`, with the error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from eventsourcing.persistence import Mapper, StoredEvent
from psycopg import sql

from palimpsest.projections.history._replay_workers import (
    SPLIT_FROM,
    WorkerPlan,
    WorkerPool,
    default_workers,
    replay_units,
    workers_for,
)
from palimpsest.projections.history.log_scan import Progress, log_head
from palimpsest.projections.history.rebuild import tenant_sizes
from palimpsest.projections.store.database import Database
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import set_tenant
from palimpsest.projections.views.belief_facts import projection_error
from palimpsest.projections.views.read_model_parts import TenantPart
from palimpsest.projections.views.read_models import TABLES, TableSpec, TenantReadModels

__all__ = ["Divergence", "VerifyReport", "verify"]


@dataclass(frozen=True)
class Divergence:
    """One difference between a live read model and its recomputation."""

    tenant_id: UUID
    table: str
    key: dict[str, str]
    field: str
    live: Any
    expected: Any

    @property
    def memory_id(self) -> str | None:
        """Return the memory the row belongs to, when its key names one."""
        return self.key.get("memory_id")

    def as_dict(self) -> dict[str, Any]:
        """Return the divergence as a JSON-ready mapping."""
        return {
            "tenant_id": str(self.tenant_id),
            "table": self.table,
            "key": self.key,
            "memory_id": self.memory_id,
            "field": self.field,
            "live": _json(self.live),
            "expected": _json(self.expected),
        }


@dataclass
class VerifyReport:
    """What verify compared and every divergence it found."""

    position: int
    tenants: int = 0
    events: int = 0
    rows: int = 0
    pending: int = 0
    """Memories pending revision, whose belief content was not compared."""
    unprojectable: list[dict[str, str]] = field(default_factory=list)
    """Memories the projection fails on (``tenant_id``, ``memory_id``, ``error``): the
    drain quarantines them; a later write or a fixed projection ends that."""
    divergences: list[Divergence] = field(default_factory=list)


def _json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | dict | list):
        return value
    return str(value)


def _named(spec: TableSpec, key: tuple[Any, ...]) -> dict[str, str]:
    return {column: str(value) for column, value in zip(spec.key, key, strict=True)}


def _compare(
    report: VerifyReport,
    tenant_id: UUID,
    spec: TableSpec,
    live: dict[tuple[Any, ...], tuple[Any, ...]],
    expected: dict[tuple[Any, ...], tuple[Any, ...]],
) -> None:
    report.rows += len(live)
    if live == expected:
        # The common case, compared in C: the loop below took 0.2-0.3 s of the
        # benchmark tenant's 182,000 rows, to list nothing.
        return
    found: list[Divergence] = []
    for key, have in live.items():
        want = expected.get(key)
        if want is None:
            found.append(
                Divergence(tenant_id, spec.name, _named(spec, key), "(row)", "present", "absent")
            )
        elif have != want:
            found.extend(
                Divergence(tenant_id, spec.name, _named(spec, key), column, a, b)
                for column, a, b in zip(spec.values, have, want, strict=True)
                if a != b
            )
    found.extend(
        Divergence(tenant_id, spec.name, _named(spec, key), "(row)", "absent", "present")
        for key in expected.keys() - live.keys()
    )
    # Sorted only when there is something to list: sorting every key costs seconds.
    report.divergences.extend(sorted(found, key=lambda d: (str(d.key), d.field)))


def _live_rows(
    cur: Any, schema: str, spec: TableSpec, tenant_id: UUID, part: TenantPart | None
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Return the live rows of ``spec``'s table that the tenant's ``part`` holds."""
    if part is not None and spec.owner is None and not part.holds_tenant_rows:
        return {}
    # The tenant is named as well as set: a superuser owner bypasses row-level security.
    statement = sql.SQL("SELECT {} FROM {}.{} WHERE tenant_id = %s").format(
        sql.SQL(", ").join(map(sql.Identifier, spec.columns)),
        sql.Identifier(schema),
        sql.Identifier(spec.name),
    )
    if part is not None and spec.owner is not None:
        statement += sql.SQL(" AND ") + part.owned(spec.owner)
    cur.execute(statement, (tenant_id,))
    width = len(spec.key)
    return {tuple(row[:width]): tuple(row[width:]) for row in cur.fetchall()}


def _verify_tenant(
    report: VerifyReport, cur: Any, schema: str, models: TenantReadModels, marked: int | None
) -> None:
    tenant_id = models.tenant_id
    set_tenant(cur, tenant_id)
    part = models.part
    live = {spec.name: _live_rows(cur, schema, spec, tenant_id, part) for spec in TABLES}
    for spec in TABLES:
        if spec.name in {"revisions", "beliefs"}:
            continue
        _compare(report, tenant_id, spec, live[spec.name], dict(models.table_rows(spec.name)))
    revisions_spec, beliefs_spec = TABLES[-2], TABLES[-1]
    published = {key: values[1] for key, values in live["revisions"].items()}
    # A requested revision above the recomputed one is not a divergence: stores
    # written before marking was exact (it marked linked and co-citing memories
    # too) hold such marks, and over-marking only costs a republish. Below it
    # would serve a stale belief as current, and is reported.
    requested_live = {key: values[0] for key, values in live["revisions"].items()}
    expected_requested = {
        key: max(values[0], requested_live.get(key, 0))
        for key, values in models.table_rows("revisions")
    }
    # Whether and why the drain quarantined a memory is not compared: it may not have
    # tried yet (and a quarantine ends with a later write); unprojectable lists those
    # the recomputation fails on.
    expected_revisions = {
        key: (requested, published.get(key, 0), *live["revisions"].get(key, (0, 0, None, None))[2:])
        for key, requested in expected_requested.items()
    }
    _compare(report, tenant_id, revisions_spec, live["revisions"], expected_revisions)
    expected_beliefs: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for key, _ in models.table_rows("revisions"):
        error = key[0] in models.memories and models.unprojectable(key[0])
        if not error:
            continue
        report.unprojectable.append(
            {
                "tenant_id": str(tenant_id),
                "memory_id": str(key[0]),
                "error": projection_error(error),
            }
        )
        held = live["beliefs"].get(key)
        if held is not None and held[0] == published.get(key, 0):
            expected_beliefs[key] = held  # published before the memory became unprojectable
    for key, computed in models.table_rows("beliefs"):
        values = (expected_requested.get(key, computed[0]), *computed[1:])
        requested, current = values[0], published.get(key, 0)
        if current == requested:
            expected_beliefs[key] = values
            continue
        report.pending += 1
        held = live["beliefs"].get(key)
        if current > 0 and held is not None and held[0] == current:
            expected_beliefs[key] = held  # computed at an earlier revision; not comparable
        elif current > 0:
            expected_beliefs[key] = (current, *values[1:])
    _compare(report, tenant_id, beliefs_spec, live["beliefs"], expected_beliefs)
    if (part is None or part.holds_tenant_rows) and marked != models.marked:
        report.divergences.append(
            Divergence(
                tenant_id,
                "revision_tenants",
                {"tenant_id": str(tenant_id)},
                "marked_position",
                marked,
                models.marked,
            )
        )


def _verify_snapshots(
    report: VerifyReport, cur: Any, schema: str, mapper: Mapper[UUID], models: TenantReadModels
) -> None:
    """Every stored snapshot must hold the state replay reaches at that version.

    A snapshot the write path failed to take is not a divergence (it costs only
    speed); rebuild writes the full set.
    """
    statement = schema_sql(
        "SELECT originator_id, originator_version, topic, state"
        " FROM {schema}.palimpsest_snapshots WHERE tenant_id = %s",
        schema,
    )
    if models.part is not None:
        statement += sql.SQL(" AND ") + models.part.owned("originator_id")
    cur.execute(statement, (models.tenant_id,))
    for originator_id, version, topic, state in cur.fetchall():
        report.rows += 1
        key = {"memory_id": str(originator_id), "originator_version": str(version)}
        expected = models.snapshots.get((originator_id, version))
        if expected is None:
            report.divergences.append(
                Divergence(models.tenant_id, SNAPSHOTS_TABLE, key, "(row)", "present", "absent")
            )
            continue
        live = mapper.to_domain_event(StoredEvent(originator_id, version, topic, bytes(state)))
        held: dict[str, Any] = getattr(live, "state", {})
        for name in sorted(held.keys() | expected.keys()):
            if held.get(name) != expected.get(name):
                report.divergences.append(
                    Divergence(
                        models.tenant_id,
                        SNAPSHOTS_TABLE,
                        key,
                        name,
                        held.get(name),
                        expected.get(name),
                    )
                )


@dataclass(frozen=True)
class _VerifyTask:
    """A worker's part of verify: compare its tenants, in the pinned snapshot."""

    schema: str
    marks: dict[UUID, int]

    def after_replay(
        self, conn: Any, mapper: Mapper[UUID], models: list[TenantReadModels]
    ) -> VerifyReport:
        whole = [t for t in models if t.part is None or t.part.holds_tenant_rows]
        result = VerifyReport(position=0, tenants=len(whole))
        # Binary: ids, times and numbers read from the live tables as the same values,
        # without parsing their text.
        with conn.cursor(binary=True) as cur:
            for tenant in models:
                _verify_tenant(result, cur, self.schema, tenant, self.marks.get(tenant.tenant_id))
                _verify_snapshots(result, cur, self.schema, mapper, tenant)
        return result

    def after_catch_up(self, conn: Any, mapper: Mapper[UUID], changed: Any) -> None:
        return None


def verify(
    database: Database,
    *,
    tenant: UUID | None = None,
    workers: int | None = None,
    split_from: int = SPLIT_FROM,
    report: Callable[[str], None] = lambda _: None,
) -> VerifyReport:
    """Recompute every read model (of one tenant, or all) at one pinned position and
    compare every row and field with the live tables.

    ``workers`` compare tenants in parallel (default: one per core; one in a
    thread of this process, the others in processes), all in the same exported
    snapshot; a large tenant in parts, as :func:`~palimpsest.projections.history.rebuild.rebuild`
    replays it.
    """
    schema = database.schema
    with database.owner_connection(autocommit=True) as conn, conn.transaction():
        with conn.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("SELECT pg_export_snapshot()")
            exported = cur.fetchone()
            assert exported is not None
            head = log_head(cur, schema)
            sizes = {t: n for t, n in tenant_sizes(cur, schema).items() if tenant in (None, t)}
            cur.execute(
                schema_sql(
                    "SELECT tenant_id, marked_position FROM {schema}.revision_tenants", schema
                )
            )
            marks = dict(cur.fetchall())
        wanted = workers or default_workers()
        pool = WorkerPool(workers_for(sizes, wanted, split_from=split_from))
        units = replay_units(sizes, pool.workers, split_from=split_from)
        pool.start()
        progress = Progress("verify", head, report)
        try:
            task = _VerifyTask(schema, marks)
            pool.assign(WorkerPlan(database.owner_conninfo(), schema, exported[0], task))
            parts = [
                part
                for results in pool.run(
                    [("replay", head)] * pool.workers,
                    "replayed",
                    progress.advance,
                    units,
                )
                for part in results
            ]
        finally:
            pool.stop()
    result = VerifyReport(position=head, tenants=len(sizes), events=progress.done)
    for part in parts:
        result.rows += part.rows
        result.pending += part.pending
        result.unprojectable.extend(part.unprojectable)
        result.divergences.extend(part.divergences)
    report(progress.line())
    return result
