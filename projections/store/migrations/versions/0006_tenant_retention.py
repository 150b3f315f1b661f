"""Tenant retention policy.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Record the retention a tenant set, and which retention applies to an observation."""
    schema = target().schema
    # Which retention applies to an observation (raw or transient) decides how a
    # tenant's shorter policy moves its deadline.
    op.add_column(
        "observation_deadlines",
        sa.Column("transient", sa.Boolean, nullable=False, server_default=sa.text("false")),
        schema=schema,
    )
    # The retention a tenant set (RetentionSet), as of the write that set it.
    op.create_table(
        "tenant_retention",
        tenant_column(),
        sa.Column("raw_hours", sa.Integer, nullable=False),
        sa.Column("transient_hours", sa.Integer, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", name="tenant_retention_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.tenant_retention TO {app}")
    isolate_tenants("tenant_retention")
    allow_tenant_updates("tenant_retention")
