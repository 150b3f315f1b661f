"""What revisions share: the deployment they run for, and DDL Core has no construct for.

Revisions create tables, columns and indexes with Alembic's operations. Row-level
security, policies, grants, roles, functions and triggers have no Core
construct: they are composed by psycopg (the schema and role names are
deployment settings, filled in as quoted identifiers, never by string
formatting) and run through ``op.execute``.

A revision is a frozen record of one step of the schema's history: it spells
out its own columns rather than reading :mod:`palimpsest.projections.store.schema`, which
describes the schema as it is now.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, LiteralString, cast

import sqlalchemy as sa
from alembic import op
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from psycopg import sql

from palimpsest.projections.store.database import Database
from palimpsest.projections.store.schema import EVENTS_TABLE

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "allow_tenant_updates",
    "clock_default",
    "execute",
    "for_each_tenant",
    "isolate_tenants",
    "library_event_table_ddl",
    "run",
    "target",
    "tenant_column",
]


def target() -> Database:
    """Return the database the running revision migrates (``migrate`` passes it in)."""
    config = op.get_context().config
    database = None if config is None else config.attributes.get("database")
    if not isinstance(database, Database):
        msg = "palimpsest's revisions run only through its migrations.migrate()"
        raise TypeError(msg)
    return database


def _driver_connection() -> psycopg.Connection[tuple[object, ...]]:
    connection = op.get_bind().connection.driver_connection
    assert connection is not None  # a migration always runs on a live connection
    return cast("psycopg.Connection[tuple[object, ...]]", connection)


def execute(statement: sql.Composable) -> None:
    """Run one statement composed by psycopg through ``op.execute``."""
    op.execute(statement.as_string(_driver_connection()))


def run(template: LiteralString, **tables: str) -> None:
    """Run one DDL statement, with ``{schema}``, ``{app}`` (the runtime role) and each
    keyword of ``tables`` filled in as quoted identifiers."""
    database = target()
    execute(
        sql.SQL(template).format(
            schema=sql.Identifier(database.schema),
            app=sql.Identifier(database.app_user),
            **{name: sql.Identifier(table) for name, table in tables.items()},
        )
    )


def _rendered(template: LiteralString) -> sa.TextClause:
    statement = sql.SQL(template).format(schema=sql.Identifier(target().schema))
    return sa.text(statement.as_string(_driver_connection()))


def tenant_column(*, primary_key: bool = False) -> sa.Column[object]:
    """Return the owning tenant's column: the transaction's tenant by default."""
    return sa.Column(
        "tenant_id",
        sa.Uuid,
        primary_key=primary_key,
        nullable=False,
        server_default=_rendered("{schema}.current_tenant()"),
    )


def clock_default() -> sa.TextClause:
    """Return the default of recorded times: the clock when the row is written, not
    when its transaction began."""
    return sa.text("clock_timestamp()")


def isolate_tenants(*tables: str) -> None:
    """Force row-level security on ``tables``: rows are seen and added only for the
    transaction's tenant (``palimpsest.tenant_id``), by every role but superusers."""
    for table in tables:
        run("ALTER TABLE {schema}.{t} ENABLE ROW LEVEL SECURITY", t=table)
        run("ALTER TABLE {schema}.{t} FORCE ROW LEVEL SECURITY", t=table)
        run(
            "CREATE POLICY tenant_reads ON {schema}.{t} FOR SELECT "
            "USING (tenant_id = {schema}.current_tenant())",
            t=table,
        )
        run(
            "CREATE POLICY tenant_inserts ON {schema}.{t} FOR INSERT "
            "WITH CHECK (tenant_id = {schema}.current_tenant())",
            t=table,
        )


def allow_tenant_updates(*tables: str) -> None:
    """Let the transaction's tenant update its own rows of ``tables`` (and only its own)."""
    for table in tables:
        run(
            "CREATE POLICY tenant_updates ON {schema}.{t} FOR UPDATE "
            "USING (tenant_id = {schema}.current_tenant()) "
            "WITH CHECK (tenant_id = {schema}.current_tenant())",
            t=table,
        )


def for_each_tenant(template: LiteralString) -> None:
    """Run ``template`` (as :func:`run`) once per tenant, with the transaction's tenant
    set to it, then unset. The statement names the tenant in its conditions too
    (``{schema}.current_tenant()``): a superuser migrating bypasses row-level security."""
    schema = target().schema
    bind = op.get_bind()
    listed = sql.SQL("SELECT tenant_id FROM {schema}.revision_tenants").format(
        schema=sql.Identifier(schema)
    )
    tenants = [row[0] for row in _driver_connection().cursor().execute(listed).fetchall()]
    for tenant_id in tenants:
        bind.execute(
            sa.text("SELECT set_config('palimpsest.tenant_id', :t, true)"), {"t": str(tenant_id)}
        )
        run(template)
    bind.execute(sa.text("SELECT set_config('palimpsest.tenant_id', '', true)"))


def library_event_table_ddl(database: Database) -> list[sql.Composed]:
    """Return the library's own DDL for the events table, its type and index.

    Taking the statements from the library (rather than copying them) keeps
    the table exactly what its recorder expects. The PL/pgSQL insert function
    is left out: it is only used with POSTGRES_ENABLE_DB_FUNCTIONS, which
    must stay off. Nothing connects: the datastore's pool is never opened.
    """
    datastore = PostgresDatastore(
        dbname=database.dbname,
        host=database.host,
        port=database.port,
        user=database.owner_user,
        password=database.owner_password,
        schema=database.schema,
    )
    datastore.register_type_adapters = lambda: None  # type: ignore[method-assign]
    recorder = PostgresApplicationRecorder(datastore, events_table_name=EVENTS_TABLE)
    return list(recorder.sql_create_statements[: recorder.create_insert_function_statement_index])
