"""Recall's filters as conditions on the searched rows: type, scope, project, topic,
and a project with everything below it.

The vector search, the text search and the count that chooses between the index and
an exact search put the same conditions in their statements, so every filter selects
before the search's cut, never after a global top k.

``project_under`` selects a project and the projects below it, ``/`` separating
levels: ``a`` selects ``a`` and ``a/b``, not ``ab``. It is what a LangGraph namespace
prefix asks for. It reads a range in byte order (the ``~>=~`` and ``~<~`` operators),
where a prefix is a range whatever the database's collation, so the btree indexes on
``project text_pattern_ops`` serve it (migration 0023); the exact test rechecks the
range's few strays (``a-b``, ``a.b``: what sorts between ``a`` and ``a/``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Text, exists, func, or_, select

from palimpsest.projections.views.listing import attribute_conditions, attribute_values
from palimpsest.projections.views.statement import inline, param

__all__ = [
    "BELOW",
    "Filters",
    "filter_conditions",
    "filters_of",
]

BELOW = "/"
"""What separates a project's levels for ``project_under``."""

_PAST_BELOW = chr(ord(BELOW) + 1)
"""The character right after :data:`BELOW`: ``p + _PAST_BELOW`` bounds every project
that starts with ``p + BELOW``."""


class Filters:
    """A recall's filters: the statement's shape (which conditions) and its parameters."""

    __slots__ = ("attributes", "topic", "under")

    def __init__(
        self,
        memory_type: str | None,
        scope: str | None,
        project: str | None,
        topic: str | None,
        project_under: str | None,
    ) -> None:
        self.attributes = attribute_values(memory_type, scope, project)
        self.topic = topic
        self.under = project_under

    @property
    def shape(self) -> tuple[tuple[str, ...], bool, bool]:
        """The filtered columns, whether a topic is, and whether ``project_under`` is:
        the arguments of :func:`filter_conditions` (statements are cached by them)."""
        return tuple(self.attributes), self.topic is not None, self.under is not None

    @property
    def params(self) -> dict[str, object]:
        """The statement parameters of the filters given."""
        values: dict[str, object] = dict(self.attributes)
        if self.topic is not None:
            values["topic"] = self.topic
        if self.under is not None:
            values["under"] = self.under
            values["under_below"] = self.under + BELOW
            values["under_end"] = self.under + _PAST_BELOW
        return values


def filters_of(where: Any) -> Filters:
    """Return the filters of a recall query (a ``RecallQuery``)."""
    return Filters(where.memory_type, where.scope, where.project, where.topic, where.project_under)


def filter_conditions(
    tables: dict[str, Any], table: Any, filtered: tuple[str, ...], topic: bool, under: bool
) -> list[ColumnElement[bool]]:
    """Return the conditions of the filters on ``table``'s rows (embeddings or texts,
    which both carry type, scope and project): ``%(column)s`` for each ``filtered``
    column, ``%(topic)s`` when ``topic``, ``%(under)s`` (with ``%(under_below)s`` and
    ``%(under_end)s``) when ``under``."""
    conditions = attribute_conditions(table, filtered)
    if topic:
        conditions.append(_of_topic(tables, table))
    if under:
        conditions.extend(_under(table))
    return conditions


def _of_topic(tables: dict[str, Any], e: Any) -> ColumnElement[bool]:
    """The condition that row ``e``'s memory has ``%(topic)s``: the topic is a memory
    attribute the embeddings and texts do not copy, so it is looked up by primary key."""
    m = tables["memory_index"].alias("t")
    return exists(
        select(inline(1)).where(
            m.c.memory_id == e.c.memory_id, m.c.topic == param("topic", m.c.topic.type)
        )
    )


def _under(e: Any) -> list[ColumnElement[bool]]:
    """The conditions that row ``e``'s project is ``%(under)s`` or below it."""
    under = param("under", Text)
    return [
        e.c.project.op("~>=~", is_comparison=True)(under),
        e.c.project.op("~<~", is_comparison=True)(param("under_end", Text)),
        or_(e.c.project == under, func.starts_with(e.c.project, param("under_below", Text))),
    ]
