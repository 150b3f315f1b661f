"""Erasure as reads show it: a placeholder naming the erasure, in place of content.

Erasure is the one thing that reaches back into every past read, so current
reads, as-of reads, histories and replays all ask here which memories are
erased and show the same placeholder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from sqlalchemy import select

from palimpsest.projections.store.sql import tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.statement import any_of, inline, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import Select, Table
    from sqlalchemy.sql.elements import ColumnElement

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "ErasurePlaceholder",
    "erased_memories",
    "erasure_decision",
    "erasure_placeholder",
]


class ErasurePlaceholder(Record):
    """What a read shows in place of erased content: the erasure that took it."""

    id: UUID
    receipt: str
    """Where the erasure's receipt is: ``/v1/erasures/{id}``."""


def erasure_placeholder(decision_id: UUID) -> ErasurePlaceholder:
    """Return the placeholder of the erasure ``decision_id``."""
    return ErasurePlaceholder(id=decision_id, receipt=f"/v1/erasures/{decision_id}")


def erasure_decision(
    decision_index: Table, erased_position: ColumnElement[Any]
) -> ColumnElement[Any]:
    """Return the erasure decision whose write set ``erased_position`` (the decision is
    recorded in the same write, so at the same position), as a scalar subquery."""
    d = decision_index.alias("d")
    return (
        select(d.c.decision_id)
        .where(d.c.position == erased_position, d.c.kind == inline("erasure"))
        .limit(inline(1))
        .scalar_subquery()
    )


def _erased(schema: str) -> Select[Any]:
    tables = tables_in(schema)
    m = tables["memory_index"].alias("m")
    return select(
        m.c.memory_id,
        erasure_decision(tables["decision_index"], m.c.erased_position).label("erased_by"),
    ).where(any_of(m.c.memory_id, "memory_ids"), m.c.erased_position.is_not(None))


def erased_memories(log: EventLog, tenant_id: UUID, memory_ids: list[UUID]) -> dict[UUID, UUID]:
    """Return the erasure decision of each of ``memory_ids`` that is erased (now: an
    erasure reaches back into every past read)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(shaped_sql(_erased, log.datastore.schema), {"memory_ids": memory_ids})
        return {row["memory_id"]: row["erased_by"] for row in cur}
