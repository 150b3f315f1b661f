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
from typing import Any
from uuid import UUID

from projections.store.eventlog import EventLog
from projections.store.migrations import EMBEDDINGS_TABLE
from projections.store.tenancy import tenant_transaction

__all__ = [
    "CandidatePair",
    "PAIRED_TYPES",
    "candidate_pairs",
    "potential_contradictions",
]

PAIRED_TYPES = ("decision", "preference", "fact")
"""Memory types that can be contradiction candidates."""

_SAME_KIND = (
    "b.model_id = a.model_id AND b.dimension = a.dimension"
    " AND b.memory_type = a.memory_type AND b.scope = a.scope"
    " AND b.project IS NOT DISTINCT FROM a.project AND b.memory_id <> a.memory_id"
)
"""Which indexed memories ``b`` can pair with ``a``."""


def _current(schema: str, alias: str) -> str:
    """SQL: memory ``alias`` is current (caught up, not archived, not erased)."""
    return (
        f'EXISTS (SELECT 1 FROM "{schema}".revisions r JOIN "{schema}".beliefs bl'
        f" USING (tenant_id, memory_id) WHERE r.memory_id = {alias}.memory_id"
        " AND r.published >= r.requested AND bl.current_version_id = "
        f"{alias}.version_id AND bl.belief->'labels'->'archived' = 'null'::jsonb)"
    )


def potential_contradictions(
    log: EventLog, tenant_id: UUID, memory_id: UUID, version_id: UUID, floor: float
) -> dict[str, Any]:
    """Return the current memories that ``memory_id``'s version ``version_id`` might
    contradict: ``{status: ready, floor, items: [{memory_id, version_id,
    similarity}]}`` newest first, or ``{status: pending}`` while the version is
    not embedded yet. Types other than decision, preference and fact are never
    paired (``ready`` with no items, and the reason)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT memory_type, version_id FROM "{schema}".{EMBEDDINGS_TABLE}'
            " WHERE memory_id = %s AND version_id = %s LIMIT 1",
            (memory_id, version_id),
        )
        mine = cur.fetchone()
        if mine is None:
            return {"status": "pending", "floor": floor, "items": []}
        if mine["memory_type"] not in PAIRED_TYPES:
            return {
                "status": "ready",
                "floor": floor,
                "items": [],
                "reason": f"{mine['memory_type']} memories are never paired",
            }
        cur.execute(
            "SELECT b.memory_id, b.version_id, 1 - (a.embedding <=> b.embedding) AS similarity"
            f' FROM "{schema}".{EMBEDDINGS_TABLE} a'
            f' JOIN "{schema}".{EMBEDDINGS_TABLE} b ON {_SAME_KIND}'
            f' JOIN "{schema}".memory_index m ON m.memory_id = b.memory_id'
            " WHERE a.memory_id = %s AND a.version_id = %s"
            " AND 1 - (a.embedding <=> b.embedding) >= %s"
            f" AND {_current(schema, 'b')}"
            " ORDER BY m.position DESC, b.memory_id",
            (memory_id, version_id, floor),
        )
        items = [
            {
                "memory_id": str(r["memory_id"]),
                "version_id": str(r["version_id"]),
                "similarity": round(float(r["similarity"]), 6),
            }
            for r in cur
        ]
    return {"status": "ready", "floor": floor, "items": items}


@dataclass(frozen=True)
class CandidatePair:
    """Two memories that might conflict: ``newer`` was created after ``older``."""

    newer: UUID
    older: UUID
    similarity: float


def candidate_pairs(
    log: EventLog, tenant_id: UUID, *, floor: float, cap: int = 40
) -> list[CandidatePair]:
    """Return up to ``cap`` pairs of the tenant's current memories that might
    conflict, most similar first, each oriented newer first; pairs already joined
    by an edge (either way) are left out."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            "SELECT a.memory_id AS newer, b.memory_id AS older,"
            " 1 - (a.embedding <=> b.embedding) AS similarity"
            f' FROM "{schema}".{EMBEDDINGS_TABLE} a'
            f' JOIN "{schema}".memory_index ma ON ma.memory_id = a.memory_id'
            f' JOIN "{schema}".{EMBEDDINGS_TABLE} b ON {_SAME_KIND}'
            f' JOIN "{schema}".memory_index mb ON mb.memory_id = b.memory_id'
            " WHERE a.memory_type = ANY(%s)"
            " AND (mb.position, mb.memory_id) < (ma.position, ma.memory_id)"
            " AND 1 - (a.embedding <=> b.embedding) >= %s"
            f" AND {_current(schema, 'a')} AND {_current(schema, 'b')}"
            f' AND NOT EXISTS (SELECT 1 FROM "{schema}".memory_links l'
            " WHERE l.memory_id = a.memory_id AND l.linked_id = b.memory_id)"
            " ORDER BY similarity DESC, a.memory_id, b.memory_id LIMIT %s",
            (list(PAIRED_TYPES), floor, cap),
        )
        return [
            CandidatePair(r["newer"], r["older"], round(float(r["similarity"]), 6)) for r in cur
        ]
