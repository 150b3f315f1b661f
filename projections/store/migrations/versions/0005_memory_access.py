"""Memory access counts for salience.

Revision ID: 0005
Revises: 0004
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

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the tuning state for salience: how often and when reads returned each memory.

    Never an event, never a label; losing it only resets ranking.
    """
    schema = target().schema
    op.create_table(
        "memory_access",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("accesses", sa.BigInteger, nullable=False),
        sa.Column("last_access", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="memory_access_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.memory_access TO {app}")
    isolate_tenants("memory_access")
    allow_tenant_updates("memory_access")
