"""Event log, payload store, tokens, idempotency keys, row-level security.

Revision ID: 0001
Revises: none
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from psycopg import sql
from sqlalchemy.dialects.postgresql import JSONB

from palimpsest.projections.store.migrations._ddl import (
    clock_default,
    execute,
    isolate_tenants,
    library_event_table_ddl,
    run,
    target,
    tenant_column,
)
from palimpsest.projections.store.schema import EVENTS_TABLE

__all__ = ["upgrade"]

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the log and what is written with it, each table isolated by tenant."""
    database = target()
    schema = database.schema
    run("CREATE EXTENSION IF NOT EXISTS vector")
    run("CREATE SCHEMA IF NOT EXISTS {schema}")
    role_exists = op.get_bind().execute(
        sa.text("SELECT 1 FROM pg_roles WHERE rolname = :role"), {"role": database.app_user}
    )
    if role_exists.first() is None:
        run("CREATE ROLE {app} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS")
    if database.app_password:
        execute(
            sql.SQL("ALTER ROLE {app} PASSWORD {pw}").format(
                app=sql.Identifier(database.app_user), pw=sql.Literal(database.app_password)
            )
        )
    run("GRANT USAGE ON SCHEMA {schema} TO {app}")

    # The tenant of the current transaction; NULL (so inserts fail, reads see
    # nothing) when no tenant was set.
    run(
        "CREATE FUNCTION {schema}.current_tenant() RETURNS uuid LANGUAGE sql STABLE AS "
        "$$ SELECT nullif(current_setting('palimpsest.tenant_id', true), '')::uuid $$"
    )
    run("GRANT EXECUTE ON FUNCTION {schema}.current_tenant() TO {app}")

    # Events never change: no role, owner included, may update, delete or truncate them.
    run(
        "CREATE FUNCTION {schema}.refuse_change() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION '% on %.% is refused: the log is append-only', "
        "TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege'; END $$"
    )

    for statement in library_event_table_ddl(database):
        execute(statement)
    # Two ALTERs where the store before Alembic had one with two ADD COLUMNs:
    # the catalog is the same.
    op.add_column(
        EVENTS_TABLE,
        sa.Column(
            "recorded_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=clock_default(),
        ),
        schema=schema,
    )
    op.add_column(EVENTS_TABLE, tenant_column(), schema=schema)
    op.create_index(
        f"{EVENTS_TABLE}_tenant_id_notification_id_idx",
        EVENTS_TABLE,
        ["tenant_id", "notification_id"],
        schema=schema,
    )
    op.create_index(f"{EVENTS_TABLE}_recorded_at_idx", EVENTS_TABLE, ["recorded_at"], schema=schema)
    run(
        "CREATE TRIGGER events_are_immutable BEFORE UPDATE OR DELETE ON {schema}.{events} "
        "FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_change()",
        events=EVENTS_TABLE,
    )
    run(
        "CREATE TRIGGER events_are_not_truncated BEFORE TRUNCATE ON {schema}.{events} "
        "FOR EACH STATEMENT EXECUTE FUNCTION {schema}.refuse_change()",
        events=EVENTS_TABLE,
    )
    # UPDATE is granted only because LOCK TABLE ... IN EXCLUSIVE MODE, which the
    # library takes to make insert order equal commit order, requires it. No row
    # can be updated: there is no UPDATE policy and the trigger refuses it.
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.{events} TO {app}", events=EVENTS_TABLE)
    run(
        "GRANT USAGE ON SEQUENCE {schema}.{seq} TO {app}",
        seq=f"{EVENTS_TABLE}_notification_id_seq",
    )

    op.create_table(
        "payloads",
        tenant_column(),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("content", sa.LargeBinary, nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column(
            "stored_at", sa.DateTime(timezone=True), nullable=False, server_default=clock_default()
        ),
        sa.PrimaryKeyConstraint("tenant_id", "digest", name="payloads_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.payloads TO {app}")

    op.create_table(
        "tokens",
        tenant_column(),
        sa.Column("token_digest", sa.Text, nullable=False),
        sa.Column("token_id", sa.Uuid, nullable=False),
        sa.Column("principal_id", sa.Uuid, nullable=False),
        sa.Column("principal_name", sa.Text, nullable=False),
        sa.Column("role", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("token_digest", name="tokens_pkey"),
        sa.UniqueConstraint("token_id", name="tokens_token_id_key"),
        sa.CheckConstraint("role IN ('reader', 'writer', 'admin')", name="tokens_role_check"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.tokens TO {app}")

    op.create_table(
        "idempotency_keys",
        tenant_column(),
        sa.Column("principal_id", sa.Uuid, nullable=False),
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("request_digest", sa.Text, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=False),
        sa.Column("response", JSONB, nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), nullable=False, server_default=clock_default()
        ),
        sa.PrimaryKeyConstraint("tenant_id", "principal_id", "key", name="idempotency_keys_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.idempotency_keys TO {app}")

    isolate_tenants(EVENTS_TABLE, "payloads", "tokens", "idempotency_keys")
