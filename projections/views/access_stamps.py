"""Access counts: the tuning state salience reads, stamped by reads.

Reads that return a memory's current belief *to use* stamp it (one more
access, and when): a single read by id (``GET /v1/memories/{id}``, or the
``ids=`` batch of them) and each current memory recall returns. Listings,
as-of reads and the polls of a ``?wait=`` read count nothing: browsing is not
use, and a read that waits is one read. This is never an event and never
changes a label; it only feeds salience, and losing it resets ranking,
nothing else. Stamps are buffered in the process and written in batches
(:mod:`palimpsest.projections.views.access_buffer`); the salience computed here
counts the buffered ones too.

Ranking uses the full salience (:func:`salience_from`); reads report its
bounded score (:func:`score_from`, see :func:`palimpsest.domain.salience.score`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from uuid import UUID

from sqlalchemy import and_, select
from typing_extensions import TypedDict

from palimpsest.domain.salience import salience, score
from palimpsest.projections.store.sql import tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.access_buffer import access_buffer, merged_accesses
from palimpsest.projections.views.belief_facts import BeliefDocument
from palimpsest.projections.views.statement import any_of, events_table, shaped_sql

if TYPE_CHECKING:
    from psycopg import Cursor
    from sqlalchemy import Select
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.selectable import NamedFromClause

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "SalienceRow",
    "salience_columns",
    "salience_from",
    "score_from",
    "scores_in",
    "scores_of",
    "stamp_accesses",
]


class SalienceRow(TypedDict):
    """The columns :func:`salience_from` reads (:func:`salience_columns`)."""

    memory_type: str
    recorded_at: datetime
    accesses: int | None
    last_access: datetime | None


def stamp_accesses(
    log: EventLog, tenant_id: UUID, memory_ids: Sequence[UUID], at: datetime
) -> None:
    """Count one access to each memory at ``at`` (a read returned it): buffered in this
    process and written by its flush thread, never on the read's own path
    (:mod:`palimpsest.projections.views.access_buffer`)."""
    if memory_ids:
        access_buffer(log).add(tenant_id, memory_ids, at)


def salience_columns(
    memory_index: NamedFromClause, first: NamedFromClause, access: NamedFromClause
) -> list[ColumnElement[Any]]:
    """Return the columns of :class:`SalienceRow`, for a query joining ``memory_index``,
    the events table as ``first`` (the memory's creation) and ``memory_access``."""
    return [
        memory_index.c.memory_type,
        first.c.recorded_at,
        access.c.accesses,
        access.c.last_access,
    ]


def _salience_inputs(schema: str) -> Select[Any]:
    """The salience inputs of ``%(memory_ids)s``."""
    tables = tables_in(schema)
    m = tables["memory_index"].alias("m")
    a = tables["memory_access"].alias("a")
    first = events_table(schema).alias("first")
    return (
        select(m.c.memory_id, *salience_columns(m, first, a))
        .select_from(
            m.join(first, first.c.notification_id == m.c.position).outerjoin(
                a, and_(a.c.tenant_id == m.c.tenant_id, a.c.memory_id == m.c.memory_id)
            )
        )
        .where(any_of(m.c.memory_id, "memory_ids"))
    )


def scores_of(
    log: EventLog, tenant_id: UUID, beliefs: dict[UUID, BeliefDocument], now: datetime
) -> dict[UUID, float]:
    """Return each memory's salience score at ``now`` (:func:`score_from`), from its
    belief (confidence), its type, when it was first recorded, and its accesses so far."""
    if not beliefs:
        return {}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        return scores_in(cur, log.datastore.schema, beliefs, now)


def scores_in(
    cur: Cursor[Any], schema: str, beliefs: dict[UUID, BeliefDocument], now: datetime
) -> dict[UUID, float]:
    """:func:`scores_of`, in the transaction of ``cur`` (a tenant's)."""
    cur.execute(shaped_sql(_salience_inputs, schema), {"memory_ids": list(beliefs)})
    rows = cur.fetchall()
    return {row["memory_id"]: score_from(beliefs[row["memory_id"]], row, now) for row in rows}


def salience_from(
    belief: BeliefDocument, row: SalienceRow, now: datetime, *, pin: bool = True
) -> float:
    """Return a memory's salience from its belief and a row of :func:`salience_columns`
    (the rank weight; without the pin boost when not ``pin``)."""
    # The row's counts plus the accesses this process has not written yet: a read
    # reports every access so far, as when each read wrote its own.
    accesses, last_access = merged_accesses(
        cast("Mapping[str, Any]", row).get("memory_id"), row["accesses"], row["last_access"]
    )
    return salience(
        base=float(belief.get("confidence", 1.0)),
        memory_type=row["memory_type"],
        first_recorded=row["recorded_at"],
        last_access=last_access,
        accesses=accesses,
        pinned=pin and bool(belief["labels"]["pinned"]),
        now=now,
    )


def score_from(belief: BeliefDocument, row: SalienceRow, now: datetime) -> float:
    """Return the salience score a read reports: bounded in ``[0, 1]``, without the pin
    boost (the belief's ``pinned`` label says it is pinned)."""
    return score(salience_from(belief, row, now, pin=False))
