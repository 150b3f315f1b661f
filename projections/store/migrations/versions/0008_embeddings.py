"""Memory embeddings for recall.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    clock_default,
    execute,
    isolate_tenants,
    run,
    target,
    tenant_column,
)
from palimpsest.projections.store.schema import EMBEDDINGS_TABLE, vector_index_ddl

__all__ = ["upgrade"]

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create recall's index of vectors, and the watermark of what it has indexed.

    Derived, like a cache: the indexing drain writes it from the payload store
    and a model; erasure deletes rows in the erasing transaction. It is not a
    read model of the log (rebuild cannot recompute it without the model).
    """
    schema = target().schema
    op.create_table(
        EMBEDDINGS_TABLE,
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("model_id", sa.Text, nullable=False),
        sa.Column("dimension", sa.Integer, nullable=False),
        sa.Column("version_id", sa.Uuid, nullable=False),
        sa.Column("content_digest", sa.Text, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("memory_type", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("project", sa.Text),
        sa.Column("embedding", Vector(), nullable=False),
        sa.Column(
            "embedded_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=clock_default(),
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "memory_id", "model_id", name=f"{EMBEDDINGS_TABLE}_pkey"
        ),
        sa.CheckConstraint("vector_dims(embedding) = dimension", name=f"{EMBEDDINGS_TABLE}_check"),
        schema=schema,
    )
    op.create_index(
        f"{EMBEDDINGS_TABLE}_tenant_id_model_id_memory_type_scope_proj_idx",
        EMBEDDINGS_TABLE,
        ["tenant_id", "model_id", "memory_type", "scope", "project"],
        schema=schema,
    )
    # The published revision the indexing drain last handled, per memory: work is
    # the rows below their published revision, found through a small partial index
    # instead of comparing every belief with every embedding on each pass.
    op.add_column(
        "revisions",
        sa.Column("indexed", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        schema=schema,
    )
    op.create_index(
        "revisions_unindexed",
        "revisions",
        ["tenant_id", "published"],
        schema=schema,
        postgresql_where=sa.text("indexed < published"),
    )
    op.create_index(
        f"{EMBEDDINGS_TABLE}_version_id_idx", EMBEDDINGS_TABLE, ["version_id"], schema=schema
    )
    execute(vector_index_ddl(schema, 384))
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.{t} TO {app}", t=EMBEDDINGS_TABLE)
    run(
        "CREATE POLICY tenant_deletes ON {schema}.{t} FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())",
        t=EMBEDDINGS_TABLE,
    )
    isolate_tenants(EMBEDDINGS_TABLE)
    allow_tenant_updates(EMBEDDINGS_TABLE)
