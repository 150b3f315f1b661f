"""Erasure and tenant deletion.

Revision ID: 0007
Revises: 0006
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

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Record erasures, released digests and tenant deletions."""
    schema = target().schema
    # The write that erased an observation's content (its bytes went with it).
    op.add_column(
        "observation_deadlines", sa.Column("erased_position", sa.BigInteger), schema=schema
    )
    # The write that erased a memory, so lists skip it and tenant deletion finds
    # what is left to erase.
    op.add_column("memory_index", sa.Column("erased_position", sa.BigInteger), schema=schema)
    run("GRANT UPDATE ON {schema}.memory_index TO {app}")
    allow_tenant_updates("memory_index")
    # The tenant deletion an erasure batch belongs to (receipts sum their batches).
    op.add_column("decision_index", sa.Column("part_of", sa.Uuid), schema=schema)
    op.create_index(
        "decision_index_tenant_id_part_of_idx",
        "decision_index",
        ["tenant_id", "part_of"],
        schema=schema,
        postgresql_where=sa.text("part_of IS NOT NULL"),
    )
    # An erased memory has no current version: its belief is a placeholder.
    op.alter_column("beliefs", "current_version_id", nullable=True, schema=schema)
    # Erasing a memory's last version of some content releases that digest (the
    # write's position), so the bytes can go; the row stays, as every read model's.
    op.add_column("version_digests", sa.Column("released_position", sa.BigInteger), schema=schema)
    run("GRANT UPDATE ON {schema}.version_digests TO {app}")
    allow_tenant_updates("version_digests")
    # A tenant deletion in progress (completed_position NULL) or done: the tenant
    # is closed from the request on, and the erasure drain finds its work here.
    op.create_table(
        "tenant_deletions",
        tenant_column(),
        sa.Column("decision_id", sa.Uuid, nullable=False),
        sa.Column("requested_position", sa.BigInteger, nullable=False),
        sa.Column("completed_position", sa.BigInteger),
        sa.PrimaryKeyConstraint("tenant_id", name="tenant_deletions_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.tenant_deletions TO {app}")
    isolate_tenants("tenant_deletions")
    allow_tenant_updates("tenant_deletions")
