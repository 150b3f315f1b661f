"""Pieces the reads' SQLAlchemy Core statements share, and their compiled text.

Statements are built over :func:`palimpsest.projections.store.sql.tables_in` and run on
the request's psycopg cursor. Building and compiling a statement costs
milliseconds, more than the hot queries take to run, so each statement is
built from its *shape* alone (the schema, which filters are given, which
plan is forced) with named parameters, compiled once per shape by
:func:`shaped_sql`, and executed with the request's values. Constants a
query always has (a type modifier, a label key, ``LIMIT 1``) are rendered
into the text, as hand-written SQL had them, so the planner sees them;
everything a request supplies is a parameter.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import BigInteger, Column, DateTime, MetaData, Table, Uuid, any_, bindparam, literal
from sqlalchemy.dialects.postgresql import ARRAY

from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.sql import compile_query

if TYPE_CHECKING:
    from sqlalchemy.sql import ClauseElement
    from sqlalchemy.sql.elements import BindParameter, ColumnElement

__all__ = [
    "any_of",
    "events_table",
    "inline",
    "json_field",
    "param",
    "shaped_sql",
]

_T = TypeVar("_T")


@lru_cache(maxsize=512)
def shaped_sql(build: Callable[..., ClauseElement], *shape: Hashable) -> str:
    """Return the SQL of ``build(*shape)``, compiled once per shape.

    ``build`` makes a statement whose request values are named parameters
    (:func:`param`, left without a value): the caller passes the
    values to ``execute`` under those names.
    """
    text, _ = compile_query(build(*shape))
    return text


def param(name: str, type_: Any = None) -> BindParameter[Any]:
    """Return the named parameter ``%(name)s``, its value given at execution."""
    return bindparam(name, type_=type_, required=False)


def inline(value: _T) -> BindParameter[_T]:
    """Return ``value`` as a constant rendered into the statement's text."""
    return literal(value, literal_execute=True)


def any_of(column: ColumnElement[Any], name: str) -> ColumnElement[bool]:
    """Return ``column = ANY(%(name)s)``: one array parameter, however many values
    (``IN`` would make a statement per list length)."""
    return column == any_(param(name, ARRAY(column.type)))


def json_field(document: ColumnElement[Any], *keys: str) -> ColumnElement[Any]:
    """Return ``document->'key'->…`` (jsonb), the keys rendered into the text."""
    for key in keys:
        document = document.op("->")(inline(key))
    return document


@lru_cache(maxsize=8)
def events_table(schema: str) -> Table:
    """Return the columns of the library's events table that reads join on.

    The table is the eventsourcing library's (its DDL is the library's), so it
    is not in :mod:`palimpsest.projections.store.schema`; this names the columns reads use.
    """
    return Table(
        EVENTS_TABLE,
        MetaData(schema=schema),
        Column("notification_id", BigInteger),
        Column("originator_id", Uuid),
        Column("originator_version", BigInteger),
        Column("recorded_at", DateTime(timezone=True)),
    )
