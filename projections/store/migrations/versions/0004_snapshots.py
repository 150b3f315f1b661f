"""Aggregate snapshots.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import isolate_tenants, run, target, tenant_column
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE

__all__ = ["upgrade"]

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the library's snapshot table layout, with the tenant of each row.

    Snapshots are derived from the log (rebuild rewrites them, verify checks them).
    """
    schema = target().schema
    op.create_table(
        SNAPSHOTS_TABLE,
        tenant_column(),
        sa.Column("originator_id", sa.Uuid, nullable=False),
        sa.Column("originator_version", sa.BigInteger, nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("state", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint(
            "originator_id", "originator_version", name=f"{SNAPSHOTS_TABLE}_pkey"
        ),
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.{t} TO {app}", t=SNAPSHOTS_TABLE)
    isolate_tenants(SNAPSHOTS_TABLE)
