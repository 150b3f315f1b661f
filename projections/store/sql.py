"""Running SQLAlchemy Core statements on the service's own psycopg connections.

Queries assembled from request filters are Core expressions over the tables
of :mod:`palimpsest.projections.store.schema`; they run on the same psycopg 3
connection and transaction as the rest of the request (the tenant is a
per-transaction setting), so SQLAlchemy compiles them and never connects.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import sql
from sqlalchemy import MetaData, Table
from sqlalchemy.dialects.postgresql import psycopg as _psycopg_dialect

from palimpsest.projections.store.schema import (
    EMBEDDINGS_TABLE,
    EVENTS_TABLE,
    SNAPSHOTS_TABLE,
    metadata,
)

if TYPE_CHECKING:
    from psycopg import Cursor
    from sqlalchemy.sql import ClauseElement

__all__ = [
    "Chain",
    "WRITE_POSITION_SETTING",
    "compile_query",
    "metadata_in",
    "schema_query",
    "schema_sql",
    "tables_in",
]

_DIALECT = _psycopg_dialect.dialect()  # type: ignore[no-untyped-call]


@lru_cache(maxsize=8)
def metadata_in(schema: str) -> MetaData:
    """Return a copy of the service's metadata with every table in ``schema``."""
    copy = MetaData(schema=schema)
    for table in metadata.sorted_tables:
        table.to_metadata(copy, schema=schema)
    return copy


def tables_in(schema: str) -> dict[str, Table]:
    """Return the service's tables qualified with ``schema``, by table name."""
    return {table.name: table for table in metadata_in(schema).sorted_tables}


def compile_query(statement: ClauseElement) -> tuple[str, dict[str, Any]]:
    """Return ``(sql, params)`` for psycopg's ``execute``: named placeholders, values
    bound (never rendered into the text), lists expanded for ``IN``."""
    compiled = statement.compile(dialect=_DIALECT, compile_kwargs={"render_postcompile": True})
    return str(compiled), dict(compiled.params)


WRITE_POSITION_SETTING = "palimpsest.position"
"""The transaction-local setting that holds a write's log position once its events are
inserted (the events insert of :mod:`palimpsest.projections.store.eventlog` sets it)."""

_TABLE_NAMES = {
    "events": sql.Identifier(EVENTS_TABLE),
    "snapshots": sql.Identifier(SNAPSHOTS_TABLE),
    "embeddings": sql.Identifier(EMBEDDINGS_TABLE),
    # The write's own position, read by PostgreSQL: a statement that records it needs
    # no answer from the insert first, so the whole write goes out in one round trip.
    "position": sql.SQL(f"current_setting('{WRITE_POSITION_SETTING}')::bigint"),
}


@lru_cache(maxsize=1024)
def schema_sql(template: LiteralString, schema: str) -> sql.Composed:
    """Return ``template`` with ``{schema}`` filled in as a quoted identifier.

    Hand-written statements name their tables as ``{schema}.table``; the schema
    is a deployment setting, so it is composed by psycopg (never by string
    formatting). The tables named by constants may be written
    ``{schema}.{events}``, ``{schema}.{snapshots}`` and ``{schema}.{embeddings}``;
    ``{position}`` is the log position of the write whose transaction runs it.
    Literal braces in ``template`` are written ``{{`` and ``}}``.
    """
    return sql.SQL(template).format(schema=sql.Identifier(schema), **_TABLE_NAMES)


@lru_cache(maxsize=1024)
def schema_query(template: LiteralString, schema: str) -> bytes:
    """Return ``template`` with ``{schema}`` filled in, rendered to the bytes psycopg sends.

    For hot paths: psycopg renders a composed statement again on every
    ``execute``; this renders each (template, schema) once, with the same
    quoting as :func:`schema_sql`.
    """
    return schema_sql(template, schema).as_bytes(None)


class Chain:
    """Data-modifying statements sent as one: each but the last a ``WITH`` part of it.

    psycopg spends about as much of a write's CPU on each statement it sends as
    PostgreSQL spends running a small one, so the rows a write records beside its
    events go out as one statement. Only for statements that neither read what
    another of the chain writes nor write the same rows: the parts of a ``WITH``
    share one snapshot and run in no defined order. Their parameters are
    positional, in the order the parts are added.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._params: list[Any] = []

    def add(self, query: bytes, params: Sequence[Any] = ()) -> None:
        """Queue ``query`` (rendered, as :func:`schema_query` returns it) with ``params``."""
        self._parts.append(query)
        self._params.extend(params)

    def execute(self, curs: Cursor[Any]) -> None:
        """Send what is queued as one statement on ``curs`` (nothing if none is), and
        start again empty."""
        if not self._parts:
            return
        curs.execute(_chained(tuple(self._parts)), self._params)
        self._parts, self._params = [], []


@lru_cache(maxsize=256)
def _chained(parts: tuple[bytes, ...]) -> bytes:
    """Return ``parts`` as one statement: each but the last a ``WITH`` part of it (the
    same few chains, every write: made once each)."""
    *first, last = parts
    if not first:
        return last
    withs = b", ".join(b"_%d AS (%s)" % (i, p) for i, p in enumerate(first))
    return b"WITH " + withs + b" " + last
