"""Recall by words under row-level security: an inverted index of lexemes.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import (
    for_each_tenant,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``memory_lexemes``, one row per (memory, lexeme of its current version),
    and fill it from ``memory_texts``, tenant by tenant; index ``memory_texts`` by the
    recall filters.

    Why: under forced row-level security PostgreSQL keeps a query's conditions
    behind the policy's unless their functions are leakproof, and ``@@``
    (``ts_match_vq``) is not, so ``memory_texts``' GIN index is never used by the
    runtime role and every text search read the tenant's rows. Text equality is
    leakproof: a btree on (tenant, lexeme, memory) serves the search under the
    same policies. Derived like ``memory_texts``: the indexing drain writes both in
    one transaction, erasure deletes both in the erasing one.
    """
    schema = target().schema
    op.create_table(
        "memory_lexemes",
        tenant_column(),
        sa.Column("lexeme", sa.Text, nullable=False),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "lexeme", "memory_id", name="memory_lexemes_pkey"),
        schema=schema,
    )
    op.create_index(
        "memory_lexemes_tenant_id_memory_id_idx",
        "memory_lexemes",
        ["tenant_id", "memory_id"],
        schema=schema,
    )
    # A filtered text search joins its matches to the memories the filter selects:
    # the filters' indexes, as memory_embeddings has them (equality on text is
    # leakproof, so row-level security keeps them usable).
    for name, columns in (
        (
            "memory_texts_tenant_id_memory_type_scope_project_idx",
            ["memory_type", "scope", "project"],
        ),
        ("memory_texts_tenant_id_project_idx", ["project"]),
        ("memory_texts_tenant_id_scope_idx", ["scope"]),
    ):
        op.create_index(name, "memory_texts", ["tenant_id", *columns], schema=schema)
    run("GRANT SELECT, INSERT, DELETE ON {schema}.memory_lexemes TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.memory_lexemes FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    isolate_tenants("memory_lexemes")
    for_each_tenant(
        "INSERT INTO {schema}.memory_lexemes (tenant_id, lexeme, memory_id)"
        " SELECT t.tenant_id, l.lexeme, t.memory_id FROM {schema}.memory_texts t,"
        " unnest(tsvector_to_array(t.document)) AS l(lexeme)"
        " WHERE t.tenant_id = {schema}.current_tenant()"
    )
