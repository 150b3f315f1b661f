"""Consolidation: merge proposals in the review queue, and reflections kept apart.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Let ``retention_proposals`` hold consolidation's ``merge`` proposals (and the
    decay cycle's ``decay`` ones): the action check is recreated with both.

    ``reflections``: one row per ``ReflectionRecorded`` event, written in its write's
    transaction like every dependency row, its ``redacted_position`` set by the
    erasure that redacts it. The runtime role reads, adds and updates; it never
    deletes (the text lives in the payload store and goes with the redaction).
    """
    schema = target().schema
    op.drop_constraint(
        "retention_proposals_action", "retention_proposals", schema=schema, type_="check"
    )
    op.create_check_constraint(
        "retention_proposals_action",
        "retention_proposals",
        "action IN ('keep', 'archive', 'supersede', 'conflict', 'merge', 'decay')",
        schema=schema,
    )
    op.create_table(
        "reflections",
        tenant_column(),
        sa.Column("reflection_id", sa.Uuid, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("project", sa.Text),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("content_digest", sa.Text, nullable=False),
        sa.Column("source_ids", ARRAY(sa.Uuid), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("redacted_position", sa.BigInteger),
        sa.PrimaryKeyConstraint("tenant_id", "reflection_id", name="reflections_pkey"),
        schema=schema,
    )
    op.create_index(
        "reflections_tenant_id_position_idx",
        "reflections",
        ["tenant_id", sa.text("position DESC")],
        schema=schema,
    )
    op.create_index(
        "reflections_source_ids_idx",
        "reflections",
        ["source_ids"],
        schema=schema,
        postgresql_using="gin",
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.reflections TO {app}")
    isolate_tenants("reflections")
    allow_tenant_updates("reflections")
