"""What the decay cycle reads: live memories with their score inputs, recent activity,
likely duplicates, and the fade label.

The cycle computes every score at one snapshot time from these reads
(:mod:`palimpsest.domain.retention_score`); nothing here reads a clock but the times it is
given. A memory's *time* is :mod:`palimpsest.domain.memory_time`'s, read by
:mod:`palimpsest.projections.views.memory_times` as the forgetting pass reads it.

The fade label (:func:`faded`, read with recall's candidates): a memory is faded
while the latest cycle that bucketed it faded it (``memory_fades.faded_at``), it was
not accessed since, and it is not pinned.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import Boolean, and_, cast, false, func, not_, or_

from palimpsest.domain.memory import Memory
from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.access_buffer import flush_accesses
from palimpsest.projections.views.memory_times import date_memories
from palimpsest.projections.views.statement import inline

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ColumnElement

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "DecayInput",
    "DuplicatePair",
    "decay_inputs",
    "duplicate_pairs",
    "faded",
    "recent_activity",
]


@dataclass
class DecayInput:
    """One live memory as the cycle scores it."""

    memory_id: UUID
    memory_type: str
    scope: str
    project: str | None
    version_id: UUID
    grade: str
    confidence: float
    pinned: bool
    position: int
    """Where the memory was created in the log (older memories have smaller ones)."""
    last_access: datetime | None
    faded_at: datetime | None
    """When a cycle faded it (None: not faded, or kept by a later cycle)."""
    support: frozenset[str]
    time: datetime | None = None
    """The memory's time (see the module docstring), set by :func:`decay_inputs`."""
    importance: float | None = None
    """The importance given when it was written, if one was (set by :func:`decay_inputs`)."""


@dataclass(frozen=True)
class DuplicatePair:
    """Two live memories of one type, scope and project, ``older`` created first."""

    older: UUID
    newer: UUID
    similarity: float


_LIVE = (
    "SELECT b.memory_id, b.memory_type, b.scope, b.project, b.current_version_id,"
    " b.grade, coalesce((b.belief->>'confidence')::float8, 1.0) AS confidence,"
    " coalesce((b.belief->'labels'->>'pinned')::boolean, false) AS pinned,"
    " b.belief->'support' AS support, m.position, a.last_access, f.faded_at"
    " FROM {schema}.beliefs b"
    " JOIN {schema}.memory_index m USING (tenant_id, memory_id)"
    " LEFT JOIN {schema}.memory_access a USING (tenant_id, memory_id)"
    " LEFT JOIN {schema}.memory_fades f USING (tenant_id, memory_id)"
    " WHERE b.current_version_id IS NOT NULL AND m.erased_position IS NULL"
    " AND b.belief->'labels'->'archived' = 'null'::jsonb"
    " ORDER BY m.position, b.memory_id"
)


def decay_inputs(log: EventLog, tenant_id: UUID) -> list[DecayInput]:
    """Return the tenant's live memories (a current version, neither archived nor
    erased), oldest first, with their score inputs."""
    flush_accesses(log, tenant_id)  # read in SQL: the accesses buffered in this process too
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(schema_sql(_LIVE, log.datastore.schema))
        live = {
            r["memory_id"]: DecayInput(
                memory_id=r["memory_id"],
                memory_type=r["memory_type"],
                scope=r["scope"],
                project=r["project"],
                version_id=r["current_version_id"],
                grade=r["grade"],
                confidence=min(1.0, max(0.0, float(r["confidence"]))),
                pinned=bool(r["pinned"]),
                position=int(r["position"]),
                last_access=r["last_access"],
                faded_at=r["faded_at"],
                support=frozenset(str(s) for s in (r["support"] or [])),
            )
            for r in cur.fetchall()
        }
        if live:
            _date(cur, log, live)
    return list(live.values())


def _date(cur: Any, log: EventLog, live: dict[UUID, DecayInput]) -> None:
    """Set each live memory's time and its importance given on write."""
    dated = date_memories(cur, log, live, also=(Memory.Created,))
    for memory_id, time in dated.times.items():
        live[memory_id].time = time
    for created in dated.also:
        live[created.originator_id].importance = created.importance


_WRITES = (
    "SELECT m.scope, m.project, count(*) AS n FROM {schema}.{events} e"
    " JOIN {schema}.memory_index m ON m.memory_id = e.originator_id"
    " WHERE e.topic = %(topic)s AND e.recorded_at >= %(since)s AND e.recorded_at <= %(until)s"
    " GROUP BY m.scope, m.project"
)
_RECALLS = (
    "SELECT m.scope, m.project, count(*) AS n FROM {schema}.memory_access a"
    " JOIN {schema}.memory_index m USING (tenant_id, memory_id)"
    " WHERE a.last_access >= %(since)s AND a.last_access <= %(until)s"
    " GROUP BY m.scope, m.project"
)


def recent_activity(
    log: EventLog, tenant_id: UUID, *, since: datetime, until: datetime
) -> dict[tuple[str, str | None], int]:
    """Return the tenant's activity per (scope, project) between ``since`` and
    ``until``: versions recorded (writes), plus memories whose last access (a read by
    id, or a recall) falls in the window, each counted once."""
    counts: Counter[tuple[str, str | None]] = Counter()
    flush_accesses(log, tenant_id)  # read in SQL: the accesses buffered in this process too
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        for template, params in (
            (_WRITES, {"topic": Memory.VersionRecorded.TOPIC}),
            (_RECALLS, {}),
        ):
            cur.execute(
                schema_query(template, log.datastore.schema),
                {**params, "since": since, "until": until},
            )
            for r in cur.fetchall():
                counts[(r["scope"], r["project"])] += int(r["n"])
    return dict(counts)


_PAIRS = (
    "SELECT ma.memory_id AS older, mb.memory_id AS newer,"
    " 1 - (ea.embedding <=> eb.embedding) AS similarity"
    " FROM {schema}.{embeddings} ea"
    " JOIN {schema}.memory_index ma ON ma.memory_id = ea.memory_id"
    " JOIN {schema}.{embeddings} eb ON eb.model_id = ea.model_id"
    "  AND eb.dimension = ea.dimension AND eb.memory_type = ea.memory_type"
    "  AND eb.scope = ea.scope AND eb.project IS NOT DISTINCT FROM ea.project"
    "  AND eb.memory_id <> ea.memory_id"
    " JOIN {schema}.memory_index mb ON mb.memory_id = eb.memory_id"
    " WHERE ea.model_id = %(model)s AND ea.memory_type <> 'event'"
    " AND (ma.position, ma.memory_id) < (mb.position, mb.memory_id)"
    " AND ea.memory_id = ANY(%(ids)s) AND eb.memory_id = ANY(%(ids)s)"
    " AND 1 - (ea.embedding <=> eb.embedding) >= %(floor)s"
    " ORDER BY similarity DESC, older, newer"
)


def duplicate_pairs(
    log: EventLog,
    tenant_id: UUID,
    memories: Sequence[DecayInput],
    *,
    floor: float,
    model_id: str,
) -> list[DuplicatePair]:
    """Return the likely duplicates among ``memories`` (each embedded at its current
    version with ``model_id``): pairs of one type (never ``event``), scope and project
    whose similarity is at least ``floor``, most similar first, older side first.
    A memory not yet embedded at its current version pairs with nothing."""
    versions = {m.memory_id: m.version_id for m in memories}
    if not versions:
        return []
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(_PAIRS, log.datastore.schema),
            {"model": model_id, "ids": list(versions), "floor": floor},
        )
        rows = cur.fetchall()
        cur.execute(
            schema_query(
                "SELECT memory_id, version_id FROM {schema}.{embeddings}"
                " WHERE model_id = %(model)s AND memory_id = ANY(%(ids)s)",
                log.datastore.schema,
            ),
            {"model": model_id, "ids": list(versions)},
        )
        embedded = {r["memory_id"]: r["version_id"] for r in cur.fetchall()}
    current = {i for i, v in versions.items() if embedded.get(i) == v}
    return [
        DuplicatePair(r["older"], r["newer"], round(float(r["similarity"]), 6))
        for r in rows
        if r["older"] in current and r["newer"] in current
    ]


def faded(fades: Any, beliefs: Any, access: Any) -> ColumnElement[bool]:
    """Return the fade label of a row joining ``memory_fades``, ``beliefs`` and
    ``memory_access`` (each may be outer-joined): faded by the latest cycle that
    bucketed it, not accessed since, and not pinned."""
    pinned = cast(beliefs.c.belief.op("#>>")(inline("{labels,pinned}")), Boolean)
    return and_(
        fades.c.faded_at.is_not(None),
        or_(access.c.last_access.is_(None), access.c.last_access <= fades.c.faded_at),
        not_(func.coalesce(pinned, false())),
    )
