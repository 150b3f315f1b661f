"""Running SQLAlchemy Core statements on the service's own psycopg connections.

Queries assembled from request filters are Core expressions over the tables
of :mod:`projections.store.schema`; they run on the same psycopg 3
connection and transaction as the rest of the request (the tenant is a
per-transaction setting), so SQLAlchemy compiles them and never connects.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import sql
from sqlalchemy import MetaData, Table
from sqlalchemy.dialects.postgresql import psycopg as _psycopg_dialect

from projections.store.schema import metadata

if TYPE_CHECKING:
    from sqlalchemy.sql import ClauseElement

__all__ = ["compile_query", "schema_sql", "tables_in"]

_DIALECT = _psycopg_dialect.dialect()  # type: ignore[no-untyped-call]


@lru_cache(maxsize=8)
def _schema_metadata(schema: str) -> MetaData:
    copy = MetaData(schema=schema)
    for table in metadata.sorted_tables:
        table.to_metadata(copy, schema=schema)
    return copy


def tables_in(schema: str) -> dict[str, Table]:
    """Return the service's tables qualified with ``schema``, by table name."""
    return {table.name: table for table in _schema_metadata(schema).sorted_tables}


def compile_query(statement: ClauseElement) -> tuple[str, dict[str, Any]]:
    """Return ``(sql, params)`` for psycopg's ``execute``: named placeholders, values
    bound (never rendered into the text), lists expanded for ``IN``."""
    compiled = statement.compile(dialect=_DIALECT, compile_kwargs={"render_postcompile": True})
    return str(compiled), dict(compiled.params)


@lru_cache(maxsize=1024)
def schema_sql(template: LiteralString, schema: str) -> sql.Composed:
    """Return ``template`` with ``{schema}`` filled in as a quoted identifier.

    Hand-written statements name their tables as ``{schema}.table``; the schema
    is a deployment setting, so it is composed by psycopg (never by string
    formatting). Literal braces in ``template`` are written ``{{`` and ``}}``.
    """
    return sql.SQL(template).format(schema=sql.Identifier(schema))
