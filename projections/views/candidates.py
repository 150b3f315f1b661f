"""Contradiction candidates: similar memories that might conflict, never a verdict.

Two queries over recall's index, by the rules of the forgetting design
(seed 000): same type, same scope, ``project IS NOT DISTINCT FROM``, types
``decision``, ``preference`` and ``fact`` only (``event`` entries repeat by
construction and ``note`` is free-form), similarity at or above the
conflict floor. Nothing here records an edge, a label or a proposal: a
judge (a model or a person) decides what a candidate is.

- :func:`potential_contradictions`: for one memory's current version, the
  current memories it might contradict, newest first.
- :func:`candidate_pairs`: pairs across a tenant, oriented newer first,
  without pairs already joined by an edge, capped; the input of a
  forgetting pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from sqlalchemy import Float, Integer, and_, exists, func, not_, or_, select, tuple_

from palimpsest.projections.store.sql import schema_sql, tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.current_beliefs import unarchived
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.statement import any_of, inline, param, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import Select, Table
    from sqlalchemy.sql.elements import ColumnElement

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "Candidate",
    "CandidatePair",
    "Candidates",
    "LEAST_TO_JUDGE",
    "NEAREST_TO_JUDGE",
    "PAIRED_TYPES",
    "candidate_pairs",
    "cosine_similarity",
    "never_paired",
    "potential_contradictions",
    "same_kind",
]

PAIRED_TYPES = ("decision", "preference", "fact")
"""Memory types that can be contradiction candidates."""

NEAREST_TO_JUDGE = 3
"""A caller that judges its own conflicts is also shown this many of the new memory's
most similar memories of its kind, whatever the conflict floor: the memory an update
replaces is its nearest in 36 of the 46 real updates of the knowledge-updates
development split and among its 3 nearest in 43, often well below the floor (a cat's
age, 0.37; a tutor's weekday, 0.43: long turns dilute their similarity)."""

LEAST_TO_JUDGE = 0.25
"""...when at least this similar (the least similarity at which recall calls a memory
related to a question): nothing unrelated is put to the caller."""


class Candidate(Record):
    """A current memory the new version might contradict (advisory, never a verdict)."""

    memory_id: UUID
    version_id: UUID
    similarity: float


class Candidates(Record):
    """Potential contradictions: same type, scope and project, similarity at or above
    the conflict floor, newest first; ``pending`` until the version is embedded."""

    status: Literal["ready", "pending"]
    floor: float
    items: list[Candidate]
    reason: str | None = None


def same_kind(a: Any, b: Any) -> ColumnElement[bool]:
    """Which indexed memories ``b`` can pair with ``a``."""
    return and_(
        b.c.model_id == a.c.model_id,
        b.c.dimension == a.c.dimension,
        b.c.memory_type == a.c.memory_type,
        b.c.scope == a.c.scope,
        b.c.project.is_not_distinct_from(a.c.project),
        b.c.memory_id != a.c.memory_id,
    )


def _current(tables: dict[str, Table], e: Any) -> ColumnElement[bool]:
    """Memory ``e`` is current at its indexed version (caught up, not archived)."""
    r = tables["revisions"].alias("r")
    bl = tables["beliefs"].alias("bl")
    return exists(
        select(inline(1))
        .select_from(
            r.join(bl, and_(bl.c.tenant_id == r.c.tenant_id, bl.c.memory_id == r.c.memory_id))
        )
        .where(
            r.c.memory_id == e.c.memory_id,
            r.c.published >= r.c.requested,
            bl.c.current_version_id == e.c.version_id,
            unarchived(bl.c.belief),
        )
    )


def cosine_similarity(a: Any, b: Any) -> ColumnElement[float]:
    """``1 - (a.embedding <=> b.embedding)``: cosine similarity."""
    similarity: ColumnElement[float] = inline(1) - a.c.embedding.cosine_distance(b.c.embedding)
    return similarity


def _near_version(schema: str, to_judge: bool) -> Select[Any]:
    """The current memories near ``%(version_id)s`` of ``%(memory_id)s``, newest first:
    at least ``%(floor)s`` similar; ``to_judge``, also the ``%(nearest)s`` most similar
    at least ``%(least)s`` similar, and those recall marks it possibly superseding."""
    tables = tables_in(schema)
    a = tables["memory_embeddings"].alias("a")
    b = tables["memory_embeddings"].alias("b")
    m = tables["memory_index"].alias("m")
    similarity = cosine_similarity(a, b)
    near = (
        select(b.c.memory_id, b.c.version_id, similarity.label("similarity"))
        .select_from(a.join(b, same_kind(a, b)).join(m, m.c.memory_id == b.c.memory_id))
        .where(
            a.c.memory_id == param("memory_id", a.c.memory_id.type),
            a.c.version_id == param("version_id", a.c.version_id.type),
            _current(tables, b),
        )
        .order_by(m.c.position.desc(), b.c.memory_id)
    )
    if not to_judge:
        return near.where(similarity >= param("floor", Float))
    marks = tables["conflict_marks"].alias("k")
    ranked = near.add_columns(
        m.c.position,
        func.row_number().over(order_by=(similarity.desc(), b.c.memory_id)).label("nearness"),
        exists(
            select(inline(1)).where(
                marks.c.newer_id == a.c.memory_id, marks.c.older_id == b.c.memory_id
            )
        ).label("marked"),
    ).subquery("s")
    return (
        select(ranked.c.memory_id, ranked.c.version_id, ranked.c.similarity)
        .where(
            or_(
                ranked.c.similarity >= param("floor", Float),
                and_(
                    ranked.c.nearness <= param("nearest", Integer),
                    ranked.c.similarity >= param("least", Float),
                ),
                ranked.c.marked,
            )
        )
        .order_by(ranked.c.position.desc(), ranked.c.memory_id)
    )


def never_paired(memory_type: str, floor: float) -> Candidates:
    """Return the candidates of a version of ``memory_type``, one never paired:
    ``ready``, none, and the reason."""
    return Candidates(
        status="ready", floor=floor, items=[], reason=f"{memory_type} memories are never paired"
    )


def potential_contradictions(
    log: EventLog,
    tenant_id: UUID,
    memory_id: UUID,
    version_id: UUID,
    floor: float,
    *,
    to_judge: bool = False,
) -> Candidates:
    """Return the current memories that ``memory_id``'s version ``version_id`` might
    contradict, newest first, or ``pending`` while the version is not embedded yet.
    Types other than decision, preference and fact are never paired (``ready`` with
    no items, and the reason), known from the memory's index row without waiting
    for the version's embedding.

    ``to_judge``: what a caller that judges them itself is shown (MCP ``remember``):
    also its :data:`NEAREST_TO_JUDGE` most similar memories of its kind, at least
    :data:`LEAST_TO_JUDGE` similar, and every one recall marks it possibly superseding
    (``conflict_marks``, written with its vectors), so nothing recall will mark, nor
    the memory it most likely updates, goes untold."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT coalesce(m.memory_type, e.memory_type) AS memory_type,"
                " e.version_id AS embedded"
                " FROM (SELECT %s::uuid AS memory_id) AS q"
                " LEFT JOIN {schema}.memory_index m ON m.memory_id = q.memory_id"
                " LEFT JOIN {schema}.memory_embeddings e"
                " ON e.memory_id = q.memory_id AND e.version_id = %s"
                " LIMIT 1",
                schema,
            ),
            (memory_id, version_id),
        )
        mine = cur.fetchone()
        memory_type = mine["memory_type"] if mine else None
        if memory_type is not None and memory_type not in PAIRED_TYPES:
            return never_paired(memory_type, floor)
        if mine is None or mine["embedded"] is None:
            return Candidates(status="pending", floor=floor, items=[])
        cur.execute(
            shaped_sql(_near_version, schema, to_judge),
            {
                "memory_id": memory_id,
                "version_id": version_id,
                "floor": floor,
                "nearest": NEAREST_TO_JUDGE,
                "least": LEAST_TO_JUDGE,
            },
        )
        items = [
            Candidate(
                memory_id=r["memory_id"],
                version_id=r["version_id"],
                similarity=round(float(r["similarity"]), 6),
            )
            for r in cur
        ]
    return Candidates(status="ready", floor=floor, items=items)


@dataclass(frozen=True)
class CandidatePair:
    """Two memories that might conflict: ``newer`` was created after ``older``."""

    newer: UUID
    older: UUID
    similarity: float


def _pairs(schema: str) -> Select[Any]:
    """Pairs of current memories of ``%(types)s`` at least ``%(floor)s`` similar, not
    joined by an edge, most similar first, at most ``%(cap)s``."""
    tables = tables_in(schema)
    a = tables["memory_embeddings"].alias("a")
    b = tables["memory_embeddings"].alias("b")
    ma = tables["memory_index"].alias("ma")
    mb = tables["memory_index"].alias("mb")
    links = tables["memory_links"].alias("l")
    similarity = cosine_similarity(a, b).label("similarity")
    return (
        select(a.c.memory_id.label("newer"), b.c.memory_id.label("older"), similarity)
        .select_from(
            a.join(ma, ma.c.memory_id == a.c.memory_id)
            .join(b, same_kind(a, b))
            .join(mb, mb.c.memory_id == b.c.memory_id)
        )
        .where(
            any_of(a.c.memory_type, "types"),
            tuple_(mb.c.position, mb.c.memory_id) < tuple_(ma.c.position, ma.c.memory_id),
            cosine_similarity(a, b) >= param("floor", Float),
            _current(tables, a),
            _current(tables, b),
            not_(
                exists(
                    select(inline(1)).where(
                        links.c.memory_id == a.c.memory_id, links.c.linked_id == b.c.memory_id
                    )
                )
            ),
        )
        .order_by(similarity.desc(), a.c.memory_id, b.c.memory_id)
        .limit(param("cap", Integer))
    )


def candidate_pairs(
    log: EventLog, tenant_id: UUID, *, floor: float, cap: int = 40
) -> list[CandidatePair]:
    """Return up to ``cap`` pairs of the tenant's current memories that might
    conflict, most similar first, each oriented newer first; pairs already joined
    by an edge (either way) are left out."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            shaped_sql(_pairs, log.datastore.schema),
            {"types": list(PAIRED_TYPES), "floor": floor, "cap": cap},
        )
        return [
            CandidatePair(r["newer"], r["older"], round(float(r["similarity"]), 6)) for r in cur
        ]
