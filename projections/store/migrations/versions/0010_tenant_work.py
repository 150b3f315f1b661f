"""Per-tenant work-due rows: sweeps read only tenants with work.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import run, target

__all__ = ["upgrade"]

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Record which tenants have expiry, retention, deletion, revision or indexing work
    due, so an idle sweep costs a few index lookups whatever the number of tenants.

    Like ``revision_tenants``, the rows hold ids, times and positions only (no tenant
    data) and have no row-level security, so a drain finds work without a role that
    bypasses it. Existing tenants start with every kind of work due: the first pass
    after the upgrade looks at each once and records what it found.
    """
    schema = target().schema
    op.create_index(
        "revision_tenants_due",
        "revision_tenants",
        ["tenant_id"],
        schema=schema,
        postgresql_where=sa.text("marked_position > drained_position"),
    )
    # The log head over all tenants (every write marks its tenant at its position).
    op.create_index(
        "revision_tenants_marked_position_idx",
        "revision_tenants",
        ["marked_position"],
        schema=schema,
    )
    op.create_table(
        "tenant_work",
        sa.Column("tenant_id", sa.Uuid, nullable=False),
        # The earliest deadline of an observation neither expired nor erased.
        sa.Column("expiry_due_at", sa.DateTime(timezone=True)),
        # Per kind: the last write that marked the tenant, and the mark a drain
        # saw before it found nothing left (positions follow commit order).
        sa.Column("retention_marked", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("retention_done", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("deletion_marked", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("deletion_done", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("tenant_id", name="tenant_work_pkey"),
        schema=schema,
    )
    op.create_index(
        "tenant_work_expiry_due_at_idx", "tenant_work", ["expiry_due_at"], schema=schema
    )
    op.create_index(
        "tenant_work_retention_due",
        "tenant_work",
        ["tenant_id"],
        schema=schema,
        postgresql_where=sa.text("retention_marked > retention_done"),
    )
    op.create_index(
        "tenant_work_deletion_due",
        "tenant_work",
        ["tenant_id"],
        schema=schema,
        postgresql_where=sa.text("deletion_marked > deletion_done"),
    )
    # Publishes count up ``marked``; the indexing drain records the count it saw
    # before it found nothing left to embed.
    op.create_table(
        "index_tenants",
        sa.Column("tenant_id", sa.Uuid, nullable=False),
        sa.Column("marked", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("indexed", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column("published_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("tenant_id", name="index_tenants_pkey"),
        schema=schema,
    )
    op.create_index(
        "index_tenants_due",
        "index_tenants",
        ["tenant_id"],
        schema=schema,
        postgresql_where=sa.text("marked > indexed"),
    )
    op.create_index(
        "index_tenants_published_at_idx", "index_tenants", ["published_at"], schema=schema
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.tenant_work TO {app}")
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.index_tenants TO {app}")
    # Every tenant that has written: all of its work due once.
    run(
        "INSERT INTO {schema}.tenant_work (tenant_id, expiry_due_at, retention_marked,"
        " deletion_marked) SELECT tenant_id, '-infinity', 1, 1 FROM {schema}.revision_tenants"
    )
    run(
        "INSERT INTO {schema}.index_tenants (tenant_id, marked)"
        " SELECT tenant_id, 1 FROM {schema}.revision_tenants"
    )
