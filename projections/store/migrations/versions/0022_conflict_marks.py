"""Recall's possible supersessions: pairs of similar memories, oriented by time.

Revision ID: 0022
Revises: 0021
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

revision = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create ``conflict_marks``: for each decision, preference or fact, the memories of
    its type, scope and project about the same thing (their cosine ``similarity``, and
    the ``overlap`` of their rare words), older and newer. Recall marks the older of an
    unsettled pair (``possibly_superseded_by``) and ranks it below the newer.

    Derived, like ``memory_embeddings``: the indexing drain writes a memory's pairs
    whenever it handles the memory. A store's existing memories of those types are
    made due for indexing once, so the drain finds their pairs in the background
    (their vectors and words are current already: only ``indexed`` moves back, and
    recall keeps answering from them meanwhile).
    """
    schema = target().schema
    op.create_table(
        "conflict_marks",
        tenant_column(),
        sa.Column("older_id", sa.Uuid, nullable=False),
        sa.Column("newer_id", sa.Uuid, nullable=False),
        sa.Column("similarity", sa.Float, nullable=False),
        sa.Column("overlap", sa.Float),
        sa.PrimaryKeyConstraint("tenant_id", "older_id", "newer_id", name="conflict_marks_pkey"),
        schema=schema,
    )
    op.create_index(
        "conflict_marks_tenant_id_newer_id_idx",
        "conflict_marks",
        ["tenant_id", "newer_id"],
        schema=schema,
    )
    run("GRANT SELECT, INSERT, DELETE ON {schema}.conflict_marks TO {app}")
    run(
        "CREATE POLICY tenant_deletes ON {schema}.conflict_marks FOR DELETE "
        "USING (tenant_id = {schema}.current_tenant())"
    )
    isolate_tenants("conflict_marks")
    for_each_tenant(
        "UPDATE {schema}.revisions r SET indexed = 0 FROM {schema}.memory_index m"
        " WHERE r.tenant_id = {schema}.current_tenant() AND m.tenant_id = r.tenant_id"
        " AND m.memory_id = r.memory_id AND r.indexed > 0"
        " AND m.memory_type IN ('decision', 'preference', 'fact')"
    )
    run(
        "INSERT INTO {schema}.index_tenants (tenant_id, marked)"
        " SELECT tenant_id, 1 FROM {schema}.revision_tenants"
        " ON CONFLICT (tenant_id) DO UPDATE SET marked = index_tenants.marked + 1"
    )
