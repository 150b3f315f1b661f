"""How Alembic runs here: on the owner connection ``migrate`` opened, in the configured schema.

``env.py`` calls :func:`run_environment`; the comparison options it passes
(:func:`comparison_options`) are the ones ``alembic check`` and the drift test
use, so what autogenerate ignores is decided in one place.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from alembic import context

from palimpsest.projections.store.database import Database
from palimpsest.projections.store.schema import EMBEDDINGS_TABLE, EVENTS_TABLE
from palimpsest.projections.store.sql import metadata_in

if TYPE_CHECKING:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import Column
    from sqlalchemy.engine import Connection
    from sqlalchemy.sql.schema import SchemaItem

__all__ = ["comparison_options", "run_environment"]

_HNSW_PREFIX = f"{EMBEDDINGS_TABLE}_hnsw_"


def _include_object(
    item: SchemaItem, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    # The events table is the eventsourcing library's: its DDL comes from the
    # library (revision 0001), so palimpsest's metadata does not describe it.
    if type_ == "table" and name == EVENTS_TABLE:
        return False
    # One HNSW index per embedding dimension, made at runtime by
    # ensure_vector_index (projections/runtime.py) for whichever model is
    # configured: not part of the metadata, and not drift.
    return not (type_ == "index" and name is not None and name.startswith(_HNSW_PREFIX))


_QUALIFIER = re.compile(r'(?:"[^"]+"|\b[a-z_][a-z0-9_]*)\.(?=current_tenant\(\))')


def _default_differs(
    context: MigrationContext,
    inspected_column: Column[Any],
    metadata_column: Column[Any],
    inspected_default: str | None,
    metadata_default: Any,
    rendered_metadata_default: str | None,
) -> bool:
    """Compare server defaults as text, without the schema that qualifies
    ``current_tenant()`` in the database (the metadata carries no schema).

    Alembic's own comparison evaluates both expressions on the server, which
    cannot tell ``clock_timestamp()`` from itself.
    """

    def normal(default: str | None) -> str | None:
        if default is None:
            return None
        return _QUALIFIER.sub("", default.strip()).strip("'")

    return normal(inspected_default) != normal(rendered_metadata_default)


def comparison_options(schema: str) -> dict[str, Any]:
    """Return the ``configure`` options for migrating and comparing ``schema``."""

    def include_name(name: str | None, type_: str, parent_names: object) -> bool:
        return type_ != "schema" or name == schema

    return {
        "target_metadata": metadata_in(schema),
        "version_table_schema": schema,
        # Reflect the configured schema only (the metadata names it on every table).
        "include_schemas": True,
        "include_name": include_name,
        "include_object": _include_object,
        "compare_type": True,
        "compare_server_default": _default_differs,
    }


def run_environment() -> None:
    """Run the revisions (or the comparison) Alembic was asked for, in one transaction.

    Raises:
        TypeError: Alembic was run without ``migrate``'s connection and database.
    """
    connection: Connection | None = context.config.attributes.get("connection")
    database = context.config.attributes.get("database")
    if connection is None or not isinstance(database, Database):
        msg = "palimpsest's revisions run only through its migrations.migrate()"
        raise TypeError(msg)
    context.configure(connection=connection, **comparison_options(database.schema))
    with context.begin_transaction():
        context.run_migrations()
