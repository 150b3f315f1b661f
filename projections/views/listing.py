"""What listings of memories filter and page by, as SQLAlchemy Core conditions.

Current listings, as-of listings and recall filter memories by type, scope,
project and topic, each compared inside the database (type, scope and
project on the columns the indexes lead with). Listings page newest first
by (creation position, id): memories of one batch share a position, so the
id breaks ties.

Conditions name their parameters (see :func:`palimpsest.projections.views.statement.shaped_sql`):
a filter given adds a condition and its value, under the column's name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple
from uuid import UUID

from pydantic import Field
from sqlalchemy import and_, or_

from palimpsest.domain.memory import MemoryType
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.statement import param

if TYPE_CHECKING:
    from sqlalchemy.sql.elements import ColumnElement
    from sqlalchemy.sql.selectable import NamedFromClause

__all__ = [
    "ListingCursor",
    "MemoryAttributes",
    "MemoryFilter",
    "MemoryKind",
    "after_cursor",
    "attribute_conditions",
    "attribute_values",
    "cursor_values",
]


class ListingCursor(NamedTuple):
    """Where a page ended: the (creation position, id) of its last memory."""

    position: int
    memory_id: UUID


@dataclass(frozen=True)
class MemoryFilter:
    """Filters of a memory listing; ``None`` means any."""

    memory_type: str | None = None
    scope: str | None = None
    project: str | None = None
    status: Literal["current", "pending"] | None = None
    include_archived: bool = False
    """Forgotten and erased memories are left out unless asked for (then flagged by
    their belief, or shown as an erasure placeholder)."""
    topic: str | None = None
    ids: tuple[UUID, ...] | None = None
    """Only these memories (a read by ids: no other filter, no page)."""


class MemoryKind(Record):
    """A memory's immutable attributes: its type, scope, project and topic."""

    memory_type: MemoryType = Field(serialization_alias="type")
    scope: str
    project: str | None
    topic: str | None


class MemoryAttributes(MemoryKind):
    """A memory's id and immutable attributes, as every listing of memories shows them."""

    id: UUID


def attribute_values(
    memory_type: str | None, scope: str | None, project: str | None, topic: str | None = None
) -> dict[str, str]:
    """Return the type, scope, project and topic filters given (None means any), by
    column."""
    given = {"memory_type": memory_type, "scope": scope, "project": project, "topic": topic}
    return {column: value for column, value in given.items() if value is not None}


def attribute_conditions(
    table: NamedFromClause, columns: tuple[str, ...]
) -> list[ColumnElement[bool]]:
    """Return ``table.column = %(column)s`` for each of the filtered ``columns`` (the
    keys of :func:`attribute_values`)."""
    return [table.c[column] == param(column) for column in columns]


def after_cursor(table: NamedFromClause) -> ColumnElement[bool]:
    """Return the condition of the memories after the cursor in listing order
    (position descending, then id ascending); values from :func:`cursor_values`."""
    position, memory_id = table.c.position, table.c.memory_id
    after_position = param("after_position", position.type)
    return or_(
        position < after_position,
        and_(position == after_position, memory_id > param("after_id", memory_id.type)),
    )


def cursor_values(after: ListingCursor) -> dict[str, object]:
    """Return the parameters of :func:`after_cursor`."""
    return {"after_position": after.position, "after_id": after.memory_id}
