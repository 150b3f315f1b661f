"""Decision index.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import isolate_tenants, run, target, tenant_column

__all__ = ["upgrade"]

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Index each decision's logical key, so a replayed decision finds the original."""
    schema = target().schema
    op.create_table(
        "decision_index",
        tenant_column(),
        sa.Column("decision_id", sa.Uuid, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("logical_key", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "decision_id", name="decision_index_pkey"),
        schema=schema,
    )
    op.create_index(
        "decision_index_tenant_id_logical_key_position_idx",
        "decision_index",
        ["tenant_id", "logical_key", sa.text("position DESC")],
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.decision_index TO {app}")
    isolate_tenants("decision_index")
