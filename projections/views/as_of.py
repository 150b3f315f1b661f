"""As-of reads: what was believed at a log position, or at a time.

The same projection function as live reads, applied to the log prefix up to
a position. A time resolves to a position first, and every answer says which
position it used, so it is repeatable. As-of answers are never ``pending``.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from sqlalchemy import Integer, select

from palimpsest.domain.belief import project_belief
from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.store.sql import schema_sql, tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views._write_times import write_ends
from palimpsest.projections.views.belief_facts import (
    BeliefJson,
    belief_document,
    facts_of,
    memory_facts,
    projection_error,
)
from palimpsest.projections.views.current_beliefs import (
    ErasedBelief,
    ListedErasedBelief,
    ListedUnprojectableBelief,
    UnprojectableBelief,
)
from palimpsest.projections.views.erasures import erased_memories, erasure_placeholder
from palimpsest.projections.views.listing import (
    ListingCursor,
    MemoryAttributes,
    after_cursor,
    attribute_conditions,
    attribute_values,
    cursor_values,
)
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.statement import param, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import Select

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "BeliefAsOf",
    "ListedBeliefAsOf",
    "belief_as_of",
    "list_beliefs_as_of",
    "position_at",
    "write_boundary",
]


class BeliefAsOf(Record):
    """What was believed about a memory at a log position (never pending)."""

    status: Literal["as_of"] = "as_of"
    position: int
    belief: BeliefJson


class ListedBeliefAsOf(MemoryAttributes):
    """A memory in an as-of listing, with what was believed then."""

    status: Literal["as_of"] = "as_of"
    belief: BeliefJson


def position_at(log: EventLog, tenant_id: UUID, when: datetime) -> int:
    """Return the position an as-of read at ``when`` reads at (0 if nothing was
    recorded by then): the end of the tenant's last write that had begun by ``when``.

    ``recorded_at`` is the database's clock at insert, and rises with the
    position because inserts are serialised, so the answer is repeatable. A
    write's events carry rising times, and it became visible after its last
    one; a time within the write reads the state *after* it, so every time
    reported for a version or a write (its events' ``recorded_at``, its
    ``visible_at``) reads that version, never the moment before it.
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT notification_id FROM {schema}.palimpsest_events WHERE recorded_at <= %s"
                " ORDER BY notification_id DESC LIMIT 1",
                schema,
            ),
            (when,),
        )
        row = cur.fetchone()
        if row is None:
            return 0
        last = int(row["notification_id"])
        end = write_ends(cur, schema, [last]).get(last)
    return last if end is None else end.position


def write_boundary(log: EventLog, tenant_id: UUID, position: int) -> int:
    """Return ``position``, or the position before the write it falls inside.

    One write's events take consecutive positions in one transaction (the
    library locks the table while inserting), so a position in the middle of
    a write names a state no reader ever saw. Events of one transaction share
    its ``xmin``: the next event tells whether the write goes on after the
    position, and a backward index scan finds where it began, so the cost
    follows the write's size, not the log's.
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        # Two lookups by position, not a self-join: under row-level security the
        # planner will not push the join into the index and scans the log.
        cur.execute(
            schema_sql(
                "SELECT notification_id, xmin::text AS tx FROM {schema}.palimpsest_events"
                " WHERE notification_id IN (%s, %s)",
                schema,
            ),
            (position, position + 1),
        )
        found = {row["notification_id"]: row["tx"] for row in cur}
        if position not in found or found.get(position + 1) != found[position]:
            return position
        cur.execute(
            schema_sql(
                "SELECT notification_id FROM {schema}.palimpsest_events"
                " WHERE notification_id < %s AND xmin::text <> %s"
                " ORDER BY notification_id DESC LIMIT 1",
                schema,
            ),
            (position, found[position]),
        )
        before = cur.fetchone()
    return 0 if before is None else int(before["notification_id"])


def belief_as_of(
    log: EventLog, tenant_id: UUID, memory_id: UUID, position: int
) -> BeliefAsOf | ErasedBelief | UnprojectableBelief:
    """Return what was believed about a memory at a log position (never pending), or
    ``unprojectable`` (with the error) when the projection fails on its events.

    A position inside a write is read as the moment before that write; the
    answer says which position it used. A memory erased since answers
    ``erased`` with the erasure: erasure is the one thing that reaches back.

    Raises:
        NotFoundError: the memory did not exist in the tenant at that position.
    """
    position = write_boundary(log, tenant_id, position)
    facts = memory_facts(log, tenant_id, memory_id, at_position=position)
    if facts is None:
        msg = f"memory {memory_id} did not exist at position {position}"
        raise NotFoundError(msg)
    erased = erased_memories(log, tenant_id, [memory_id])
    if memory_id in erased:
        return ErasedBelief(position=position, erasure=erasure_placeholder(erased[memory_id]))
    try:
        belief = belief_document(project_belief(facts))
    except Exception as error:  # as the revision drain quarantines it
        return UnprojectableBelief(position=position, error=projection_error(error))
    return BeliefAsOf(position=position, belief=belief)


def _created_by(schema: str, filtered: tuple[str, ...], paged: bool) -> Select[Any]:
    """A page of the memories created by ``%(position)s``, newest first."""
    m = tables_in(schema)["memory_index"].alias("m")
    conditions = [
        m.c.position <= param("position", m.c.position.type),
        *attribute_conditions(m, filtered),
    ]
    if paged:
        conditions.append(after_cursor(m))
    return (
        select(m.c.memory_id, m.c.memory_type, m.c.scope, m.c.project, m.c.topic, m.c.position)
        .where(*conditions)
        .order_by(m.c.position.desc(), m.c.memory_id)
        .limit(param("limit", Integer))
    )


_ListedAsOf = ListedBeliefAsOf | ListedErasedBelief | ListedUnprojectableBelief


def list_beliefs_as_of(
    log: EventLog,
    tenant_id: UUID,
    position: int,
    *,
    memory_type: str | None,
    scope: str | None,
    project: str | None,
    limit: int,
    after: ListingCursor | None,
    include_archived: bool = False,
    topic: str | None = None,
) -> tuple[int, list[_ListedAsOf], ListingCursor | None]:
    """List what was believed at ``position``: memories created by then, newest first.

    Returns the position used (aligned to a write boundary), the page, and
    the next cursor (None on the last page). Each item is computed from the
    log prefix, so labels (archived, pinned, superseded) are as they stood;
    memories archived then (forgotten or superseded) are left out unless
    ``include_archived``. Erasure
    reaches back: a memory erased since is left out too, or shown (with
    ``include_archived``) as a placeholder naming the erasure.
    """
    position = write_boundary(log, tenant_id, position)
    filters = attribute_values(memory_type, scope, project, topic)
    query = shaped_sql(_created_by, log.datastore.schema, tuple(filters), after is not None)
    params: dict[str, object] = {**filters, "position": position, "limit": limit + 1}
    if after is not None:
        params.update(cursor_values(after))
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
    page = rows[:limit]
    ids = [r["memory_id"] for r in page]
    facts = facts_of(log, tenant_id, ids, at_position=position)
    erased = erased_memories(log, tenant_id, ids)
    items: list[_ListedAsOf] = []
    for row in page:
        memory_id = row["memory_id"]
        attributes = {
            "id": memory_id,
            "memory_type": row["memory_type"],
            "scope": row["scope"],
            "project": row["project"],
            "topic": row["topic"],
        }
        if memory_id in erased:
            if include_archived:
                erasure = erasure_placeholder(erased[memory_id])
                items.append(ListedErasedBelief(**attributes, erasure=erasure))
            continue
        try:
            projected = project_belief(facts[memory_id])
            belief = belief_document(projected)
        except Exception as error:  # as the revision drain quarantines it
            failure = projection_error(error)
            items.append(ListedUnprojectableBelief(**attributes, position=position, error=failure))
            continue
        # Archived as the projection says: forgotten, or superseded (structural).
        if include_archived or projected.archived is None:
            items.append(ListedBeliefAsOf(**attributes, belief=belief))
    next_cursor = None
    if len(rows) > limit:
        next_cursor = ListingCursor(page[-1]["position"], page[-1]["memory_id"])
    return position, items, next_cursor
