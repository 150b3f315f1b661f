"""Current beliefs: one memory's, or a filtered page of them, with the watermark.

A belief is served only when its published revision has reached the
requested one and no observation it cites is past its retention deadline
without having expired yet; otherwise the answer is ``pending``, with no
belief content. An erased memory answers ``erased``, with the erasure and
never content. A memory the revision drain quarantined
(:mod:`palimpsest.projections.drains.revision`) answers ``unprojectable``, with the
error, until a later write or a rebuild ends the quarantine. The queries
are SQLAlchemy Core over the read-model tables, each one statement, so the
watermark and the belief come from one snapshot.

A current answer carries the memory's type, scope, project and topic, and
its current version's text (:mod:`palimpsest.projections.views.version_texts`, read
with the watermark again: a memory whose watermark moved in between is
``pending``, so a text and a belief of different states are never served
together).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, TypeAdapter
from sqlalchemy import Integer, and_, cast, exists, func, not_, or_, select
from sqlalchemy.dialects.postgresql import JSONB, aggregate_order_by

from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.store.sql import tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.belief_facts import PROJECTION_ERROR_CHARS, BeliefJson
from palimpsest.projections.views.erasures import (
    ErasurePlaceholder,
    erasure_decision,
    erasure_placeholder,
)
from palimpsest.projections.views.listing import (
    ListingCursor,
    MemoryAttributes,
    MemoryFilter,
    MemoryKind,
    after_cursor,
    attribute_conditions,
    attribute_values,
    cursor_values,
)
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.statement import any_of, inline, json_field, param, shaped_sql
from palimpsest.projections.views.version_texts import (
    VersionText,
    _version_texts_in,
)

if TYPE_CHECKING:
    from psycopg import Cursor
    from sqlalchemy import Select, Table
    from sqlalchemy.sql.elements import ColumnElement

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "BeliefAnswer",
    "CurrentBelief",
    "DueDeadline",
    "ErasedBelief",
    "ListedBelief",
    "ListedCurrentBelief",
    "ListedErasedBelief",
    "ListedPendingBelief",
    "ListedUnprojectableBelief",
    "PendingBelief",
    "Revision",
    "UnprojectableBelief",
    "current_belief",
    "due_deadlines",
    "list_beliefs",
    "unarchived",
]


class Revision(Record):
    """The memory's watermark: what revision was requested, and what is published."""

    requested: int
    published: int


class DueDeadline(Record):
    """A cited observation past its retention deadline whose bytes are not gone yet."""

    observation_id: UUID
    deadline: datetime


class CurrentBelief(MemoryKind):
    """The current belief about a memory: its revision has caught up. With the
    memory's attributes and its current version's text."""

    status: Literal["current"] = "current"
    revision: Revision
    belief: BeliefJson
    content: str | None = Field(
        default=None,
        description="The current version's text (left out by include_content=false, "
        "and once its bytes are gone).",
    )
    salience: float | None = Field(
        default=None,
        description="Salience score in [0, 1] (confidence, decay since the last access, "
        "accesses; see docs/forgetting.md); a pin is the belief's pinned label. A read by "
        "id counts as an access; listings do not.",
    )


class PendingBelief(Record):
    """A memory whose revision has not caught up: no belief, the watermark, and the
    retention deadlines due (a belief citing them is held back until they expire)."""

    status: Literal["pending"] = "pending"
    revision: Revision
    due: list[DueDeadline]


class UnprojectableBelief(Record):
    """A memory the revision drain cannot project at its requested revision: no belief,
    the watermark, and the error. Not retried until a later write to the memory (or a
    rebuild); ``GET /v1/revision`` and ``palimpsest verify`` list such memories."""

    status: Literal["unprojectable"] = "unprojectable"
    revision: Revision | None = Field(default=None, description="Absent from as-of reads.")
    position: int | None = Field(default=None, description="The log position an as-of read used.")
    error: str = Field(
        description=f"Why the projection failed (its first {PROJECTION_ERROR_CHARS} characters)."
    )


class ErasedBelief(Record):
    """An erased memory: the erasure in place of its belief."""

    status: Literal["erased"] = "erased"
    revision: Revision | None = Field(default=None, description="Absent from as-of reads.")
    position: int | None = Field(default=None, description="The log position an as-of read used.")
    erasure: ErasurePlaceholder = Field(description="The erasure and its receipt.")


BeliefAnswer = Annotated[
    CurrentBelief | PendingBelief | UnprojectableBelief | ErasedBelief,
    Field(discriminator="status"),
]
"""What :func:`current_belief` answers."""


class ListedCurrentBelief(CurrentBelief, MemoryAttributes):
    """A current memory in a listing, with its belief."""


class ListedPendingBelief(MemoryAttributes):
    """A pending memory in a listing: its watermark, never stale content."""

    status: Literal["pending"] = "pending"
    revision: Revision


class ListedUnprojectableBelief(UnprojectableBelief, MemoryAttributes):
    """A quarantined memory in a listing: its watermark and error, never content."""


class ListedErasedBelief(ErasedBelief, MemoryAttributes):
    """An erased memory in a listing (listed only with ``include_archived``)."""


ListedBelief = Annotated[
    ListedCurrentBelief | ListedPendingBelief | ListedUnprojectableBelief | ListedErasedBelief,
    Field(discriminator="status"),
]
"""One memory of :func:`list_beliefs`."""

_DUE = TypeAdapter(list[DueDeadline])


def due_deadlines(tables: dict[str, Table], memory_id: ColumnElement[Any]) -> Select[Any]:
    """Return the observations cited by ``memory_id`` whose retention deadline has
    passed at ``%(now)s`` while their bytes are neither expired nor erased yet
    (``observation_id``, ``deadline``), to correlate with an outer query."""
    links = tables["evidence_links"].alias("l")
    deadlines = tables["observation_deadlines"].alias("o")
    return (
        select(deadlines.c.observation_id, deadlines.c.deadline)
        .select_from(
            links.join(
                deadlines,
                and_(
                    deadlines.c.tenant_id == links.c.tenant_id,
                    deadlines.c.observation_id == links.c.observation_id,
                ),
            )
        )
        .where(
            links.c.memory_id == memory_id,
            deadlines.c.expired_position.is_(None),
            deadlines.c.erased_position.is_(None),
            deadlines.c.deadline <= param("now", deadlines.c.deadline.type),
        )
    )


def unarchived(belief: ColumnElement[Any]) -> ColumnElement[bool]:
    """Return the condition that a belief document is not archived (forgotten)."""
    return json_field(belief, "labels", "archived") == cast(inline("null"), JSONB)


def _is_current(tables: dict[str, Table], r: Any, b: Any) -> ColumnElement[bool]:
    """Caught up, computed, and no cited observation due for expiry."""
    return and_(
        r.c.published >= r.c.requested,
        b.c.belief.is_not(None),
        not_(exists(due_deadlines(tables, r.c.memory_id))),
    )


def _watermark(schema: str) -> Select[Any]:
    """One memory's watermark, belief, due deadlines (a JSON array, earliest first)
    and erasure."""
    tables = tables_in(schema)
    r = tables["revisions"].alias("r")
    b = tables["beliefs"].alias("b")
    m = tables["memory_index"].alias("m")
    due = due_deadlines(tables, r.c.memory_id)
    observation_id, deadline = due.selected_columns
    document = func.json_build_object(
        inline("observation_id"), observation_id, inline("deadline"), deadline
    )
    return (
        select(
            r.c.requested,
            r.c.published,
            r.c.unprojectable_at,
            r.c.unprojectable_error,
            b.c.revision,
            b.c.belief,
            m.c.memory_type,
            m.c.scope,
            m.c.project,
            m.c.topic,
            due.with_only_columns(func.json_agg(aggregate_order_by(document, deadline)))
            .scalar_subquery()
            .label("due"),
            erasure_decision(tables["decision_index"], m.c.erased_position).label("erased_by"),
        )
        .select_from(
            r.outerjoin(
                b, and_(b.c.tenant_id == r.c.tenant_id, b.c.memory_id == r.c.memory_id)
            ).join(m, and_(m.c.tenant_id == r.c.tenant_id, m.c.memory_id == r.c.memory_id))
        )
        .where(r.c.memory_id == param("memory_id", r.c.memory_id.type))
    )


def current_belief(
    log: EventLog,
    tenant_id: UUID,
    memory_id: UUID,
    *,
    now: Callable[[], datetime],
) -> BeliefAnswer:
    """Return the current belief, ``pending`` while revision has not caught up, or
    ``erased`` (with the erasure, never content) once the memory is erased.

    A belief is served only when its published revision has reached the
    requested one and no observation it cites is past its retention deadline
    without having expired yet; otherwise the answer is ``pending`` with both
    numbers, the due deadlines, and no belief content. It never waits: a
    caller that waits for revision awaits publication notices between calls
    (``api/_waiting.py``).

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        return _current_belief_in(cur, log, tenant_id, memory_id, now())


def _current_belief_in(
    cur: Cursor[Any], log: EventLog, tenant_id: UUID, memory_id: UUID, at: datetime
) -> BeliefAnswer:
    """:func:`current_belief` at ``at``, in the transaction of ``cur``."""
    # One statement: the watermark, the belief and the deadlines of one snapshot. The
    # version events only when the belief may be current: a wait's polls of a pending
    # memory, hundreds a second under load, read nothing more.
    cur.execute(shaped_sql(_watermark, log.datastore.schema), {"memory_id": memory_id, "now": at})
    row = cur.fetchone()
    if row is None:
        msg = f"memory {memory_id} not found"
        raise NotFoundError(msg)
    revision = Revision(requested=row["requested"], published=row["published"])
    if row["erased_by"] is not None:
        return ErasedBelief(revision=revision, erasure=erasure_placeholder(row["erased_by"]))
    if row["unprojectable_at"] == row["requested"]:
        return UnprojectableBelief(revision=revision, error=row["unprojectable_error"])
    due = row["due"] or []
    if row["published"] >= row["requested"] and row["belief"] is not None and not due:
        # The text, in a later snapshot: the version events read for its digest (when
        # this process holds no copy of the memory) include the current version's,
        # recorded before its belief was projected.
        text = _text_of(cur, log, tenant_id, memory_id, row)
        if text.requested == row["requested"]:
            return CurrentBelief(
                **_kind(row), revision=revision, belief=row["belief"], content=text.content
            )
        # A write landed between the belief and its text: not current (yet).
        revision = Revision(requested=text.requested, published=text.published)
    return PendingBelief(revision=revision, due=_DUE.validate_python(due))


def _kind(row: Any) -> dict[str, Any]:
    """The memory's attributes in a row, as :class:`MemoryKind` names them."""
    return {k: row[k] for k in ("memory_type", "scope", "project", "topic")}


def _text_of(
    cur: Cursor[Any], log: EventLog, tenant_id: UUID, memory_id: UUID, row: Any
) -> VersionText:
    """Return the text of the current version the belief of ``row`` names."""
    versions = {memory_id: UUID(str(row["belief"]["current_version_id"]))}
    return _version_texts_in(cur, log, tenant_id, versions).get(
        memory_id, VersionText(None, row["requested"], row["published"])
    )


def _listing(
    schema: str,
    filtered: tuple[str, ...],
    include_archived: bool,
    status: str | None,
    paged: bool,
    by_ids: bool = False,
) -> Select[Any]:
    """A page of memories, newest first (``paged``: after a cursor; ``by_ids``: only
    the memories of ``%(ids)s``)."""
    tables = tables_in(schema)
    m = tables["memory_index"].alias("m")
    r = tables["revisions"].alias("r")
    b = tables["beliefs"].alias("b")
    current = _is_current(tables, r, b)
    conditions = attribute_conditions(m, filtered)
    if not include_archived:
        # A pending memory's labels are not known yet: it is listed, without content.
        conditions.append(or_(b.c.belief.is_(None), unarchived(b.c.belief)))
        conditions.append(m.c.erased_position.is_(None))
    if status == "current":
        conditions.append(current)
    elif status == "pending":
        conditions.append(not_(current))
    if paged:
        conditions.append(after_cursor(m))
    if by_ids:
        conditions.append(any_of(m.c.memory_id, "ids"))
    return (
        select(
            m.c.memory_id,
            m.c.memory_type,
            m.c.scope,
            m.c.project,
            m.c.topic,
            m.c.position,
            r.c.requested,
            r.c.published,
            r.c.unprojectable_at,
            r.c.unprojectable_error,
            b.c.belief,
            current.self_group().label("is_current"),
            erasure_decision(tables["decision_index"], m.c.erased_position).label("erased_by"),
        )
        .select_from(
            m.join(
                r, and_(r.c.tenant_id == m.c.tenant_id, r.c.memory_id == m.c.memory_id)
            ).outerjoin(b, and_(b.c.tenant_id == m.c.tenant_id, b.c.memory_id == m.c.memory_id))
        )
        .where(*conditions)
        .order_by(m.c.position.desc(), m.c.memory_id)
        .limit(param("limit", Integer))
    )


def list_beliefs(
    log: EventLog,
    tenant_id: UUID,
    where: MemoryFilter,
    *,
    limit: int,
    after: ListingCursor | None,
    now: datetime,
    include_content: bool = True,
) -> tuple[list[ListedBelief], ListingCursor | None]:
    """List memories, newest first, each current (with its belief and, unless not
    ``include_content``, its current version's text) or pending (without).

    ``after`` is the cursor: the last memory of the previous page. Returns the
    page and the next cursor (None on the last page). With ``where.ids``, lists
    those memories (the ones that exist) and nothing else.
    """
    filters = attribute_values(where.memory_type, where.scope, where.project, where.topic)
    query = shaped_sql(
        _listing,
        log.datastore.schema,
        tuple(filters),
        where.include_archived,
        where.status,
        after is not None,
        where.ids is not None,
    )
    params: dict[str, object] = {**filters, "now": now, "limit": limit + 1}
    if after is not None:
        params.update(cursor_values(after))
    if where.ids is not None:
        params["ids"] = list(where.ids)
    texts: dict[UUID, VersionText] = {}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(query, params)
        rows = cur.fetchall()
        page = rows[:limit]
        if include_content:
            current = [r for r in page if r["is_current"] and r["erased_by"] is None]
            texts = _version_texts_in(
                cur,
                log,
                tenant_id,
                {r["memory_id"]: UUID(str(r["belief"]["current_version_id"])) for r in current},
            )
    items: list[ListedBelief] = []
    for row in page:
        attributes = {"id": row["memory_id"], **_kind(row)}
        revision = Revision(requested=row["requested"], published=row["published"])
        text = texts.get(row["memory_id"])
        if row["erased_by"] is not None:
            erasure = erasure_placeholder(row["erased_by"])
            items.append(ListedErasedBelief(**attributes, revision=revision, erasure=erasure))
        elif row["unprojectable_at"] == row["requested"]:
            error = row["unprojectable_error"]
            items.append(ListedUnprojectableBelief(**attributes, revision=revision, error=error))
        elif row["is_current"] and (text is None or text.requested == row["requested"]):
            items.append(
                ListedCurrentBelief(
                    **attributes,
                    revision=revision,
                    belief=row["belief"],
                    content=None if text is None else text.content,
                )
            )
        else:
            if text is not None:  # a write landed between the belief and its text
                revision = Revision(requested=text.requested, published=text.published)
            items.append(ListedPendingBelief(**attributes, revision=revision))
    next_cursor = None
    if len(rows) > limit:
        next_cursor = ListingCursor(page[-1]["position"], page[-1]["memory_id"])
    return items, next_cursor
