"""Recall by words: the full-text index over current versions.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import TSVECTOR

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    clock_default,
    for_each_tenant,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create recall's text index, one row per memory, and fill it from the embeddings.

    Derived, like the vectors: the indexing drain writes each memory's current
    version's lexemes (text search configuration ``english``), erasure deletes
    the rows of erased versions in the erasing transaction. Memories already
    embedded get their row here, per tenant (row-level security is forced, so
    the tenant is set for each), from the embedded version's content; the rest
    are due for the drain anyway.
    """
    schema = target().schema
    op.create_table(
        "memory_texts",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("version_id", sa.Uuid, nullable=False),
        sa.Column("content_digest", sa.Text, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("memory_type", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("project", sa.Text),
        sa.Column("document", TSVECTOR, nullable=False),
        sa.Column(
            "indexed_at", sa.DateTime(timezone=True), nullable=False, server_default=clock_default()
        ),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="memory_texts_pkey"),
        schema=schema,
    )
    op.create_index(
        "memory_texts_document_idx",
        "memory_texts",
        ["document"],
        schema=schema,
        postgresql_using="gin",
    )
    op.create_index("memory_texts_version_id_idx", "memory_texts", ["version_id"], schema=schema)
    run("GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.memory_texts TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.memory_texts FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    isolate_tenants("memory_texts")
    allow_tenant_updates("memory_texts")
    for_each_tenant(
        "INSERT INTO {schema}.memory_texts (tenant_id, memory_id, version_id,"
        " content_digest, revision, memory_type, scope, project, document)"
        " SELECT DISTINCT ON (e.memory_id) e.tenant_id, e.memory_id, e.version_id,"
        " e.content_digest, e.revision, e.memory_type, e.scope, e.project,"
        " to_tsvector('english', convert_from(p.content, 'UTF8'))"
        " FROM {schema}.memory_embeddings e"
        " JOIN {schema}.beliefs b ON b.tenant_id = e.tenant_id"
        " AND b.memory_id = e.memory_id AND b.current_version_id = e.version_id"
        " JOIN {schema}.payloads p ON p.tenant_id = e.tenant_id"
        " AND p.digest = e.content_digest"
        " WHERE e.tenant_id = {schema}.current_tenant()"
        " ORDER BY e.memory_id, e.embedded_at DESC"
    )
