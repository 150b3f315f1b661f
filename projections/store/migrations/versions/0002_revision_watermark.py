"""Revision watermark and dependency rows.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    clock_default,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the watermark, the dependency rows, the memory index and the beliefs."""
    schema = target().schema
    # requested: the highest log position of an accepted event that can change
    # the memory's labels; published: the requested revision the last finished
    # drain computed against. Both only ever grow.
    op.create_table(
        "revisions",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("requested", sa.BigInteger, nullable=False),
        sa.Column("published", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.Column(
            "requested_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=clock_default(),
        ),
        sa.Column("claimed_until", sa.DateTime(timezone=True)),
        sa.Column("published_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="revisions_pkey"),
        sa.CheckConstraint("published <= requested", name="revisions_check"),
        schema=schema,
    )
    op.create_index(
        "revisions_dirty",
        "revisions",
        ["requested"],
        schema=schema,
        postgresql_where=sa.text("published < requested"),
    )
    op.create_index(
        "revisions_tenant_id_published_at_idx",
        "revisions",
        ["tenant_id", "published_at"],
        schema=schema,
    )
    op.create_table(
        "memory_links",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("linked_id", sa.Uuid, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("outgoing", sa.Boolean, nullable=False),
        sa.Column("edge_id", sa.Uuid, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", "edge_id", name="memory_links_pkey"),
        schema=schema,
    )
    op.create_table(
        "evidence_links",
        tenant_column(),
        sa.Column("observation_id", sa.Uuid, nullable=False),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "observation_id", "memory_id", name="evidence_links_pkey"
        ),
        schema=schema,
    )
    op.create_index(
        "evidence_links_tenant_id_memory_id_idx",
        "evidence_links",
        ["tenant_id", "memory_id"],
        schema=schema,
    )
    # A memory's immutable attributes, written with MemoryCreated, so lists can
    # filter memories that no drain has computed yet.
    op.create_table(
        "memory_index",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("memory_type", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("project", sa.Text),
        sa.Column("topic", sa.Text),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="memory_index_pkey"),
        schema=schema,
    )
    op.create_index(
        "memory_index_tenant_id_position_idx",
        "memory_index",
        ["tenant_id", sa.text("position DESC")],
        schema=schema,
    )
    # Retention deadlines, fixed at capture; expired_position is the write that
    # deleted the bytes. version_digests keeps expiry from deleting bytes that a
    # memory version shares (the payload store deduplicates by digest).
    op.create_table(
        "observation_deadlines",
        tenant_column(),
        sa.Column("observation_id", sa.Uuid, nullable=False),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expired_position", sa.BigInteger),
        sa.PrimaryKeyConstraint("tenant_id", "observation_id", name="observation_deadlines_pkey"),
        schema=schema,
    )
    op.create_index(
        "observation_deadlines_due",
        "observation_deadlines",
        ["tenant_id", "deadline"],
        schema=schema,
        postgresql_where=sa.text("expired_position IS NULL"),
    )
    op.create_index(
        "observation_deadlines_tenant_id_digest_idx",
        "observation_deadlines",
        ["tenant_id", "digest"],
        schema=schema,
    )
    op.create_table(
        "version_digests",
        tenant_column(),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "digest", "memory_id", name="version_digests_pkey"),
        schema=schema,
    )
    op.create_table(
        "proposer_links",
        tenant_column(),
        sa.Column("proposer_id", sa.Uuid, nullable=False),
        sa.Column("model_id", sa.Text, nullable=False),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint(
            "tenant_id", "proposer_id", "model_id", "memory_id", name="proposer_links_pkey"
        ),
        schema=schema,
    )
    # The read model of current beliefs: written only by drains, every row
    # reproducible from the log by the projection function.
    op.create_table(
        "beliefs",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("memory_type", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("project", sa.Text),
        sa.Column("topic", sa.Text),
        sa.Column("current_version_id", sa.Uuid, nullable=False),
        sa.Column("grade", sa.Text, nullable=False),
        sa.Column("belief", JSONB, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="beliefs_pkey"),
        schema=schema,
    )
    op.create_index(
        "beliefs_tenant_id_memory_type_scope_project_memory_id_idx",
        "beliefs",
        ["tenant_id", "memory_type", "scope", "project", "memory_id"],
        schema=schema,
    )
    # Which tenants may have dirty memories: ids and log positions only, no
    # tenant data, so a drain finds work without a role that bypasses RLS.
    # marked_position is the last write that marked the tenant; drained_position
    # the marked_position a drain saw before finding nothing dirty. Positions
    # follow commit order, so a tenant with marked > drained is never skipped.
    op.create_table(
        "revision_tenants",
        sa.Column("tenant_id", sa.Uuid, nullable=False),
        sa.Column("marked_position", sa.BigInteger, nullable=False),
        sa.Column("drained_position", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("tenant_id", name="revision_tenants_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.revision_tenants TO {app}")
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.revisions TO {app}")
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.beliefs TO {app}")
    for table in (
        "memory_links",
        "evidence_links",
        "proposer_links",
        "memory_index",
        "version_digests",
    ):
        run("GRANT SELECT, INSERT ON {schema}.{t} TO {app}", t=table)
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.observation_deadlines TO {app}")
    # Raw expiry deletes payload bytes (never events): the one DELETE the role has.
    run("GRANT DELETE ON {schema}.payloads TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.payloads FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    isolate_tenants(
        "revisions",
        "beliefs",
        "memory_links",
        "evidence_links",
        "proposer_links",
        "memory_index",
        "observation_deadlines",
        "version_digests",
    )
    allow_tenant_updates("revisions", "beliefs", "observation_deadlines")
