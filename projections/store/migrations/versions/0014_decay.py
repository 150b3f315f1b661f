"""The decay cycle: its recorded runs, the fade label, and the schedule's claims.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from palimpsest.projections.store.migrations._ddl import (
    allow_tenant_updates,
    isolate_tenants,
    run,
    target,
    tenant_column,
)

__all__ = ["upgrade"]

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """One row per ``CycleCompleted`` event, and one per memory a cycle faded, both
    written in the event's transaction (so a cycle is visible whole or not at all).

    ``memory_fades.faded_at`` is the snapshot time of the cycle that faded the memory,
    NULL once a later cycle kept it; reads clear the label themselves once the memory
    was accessed after ``faded_at``, or while it is pinned. The runtime role reads,
    adds and updates; it never deletes. ``decay_cycle_claims`` holds one row per
    tenant and scheduled slot (ids and times only): whichever scheduler inserts it
    runs that slot's cycle.
    """
    schema = target().schema
    op.create_table(
        "decay_cycles",
        tenant_column(),
        sa.Column("cycle_id", sa.Uuid, nullable=False),
        sa.Column("snapshot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("policy_version", sa.Integer, nullable=False),
        sa.Column("report", JSONB, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "cycle_id", name="decay_cycles_pkey"),
        schema=schema,
    )
    op.create_index(
        "decay_cycles_recent",
        "decay_cycles",
        ["tenant_id", sa.text("position DESC")],
        schema=schema,
    )
    op.create_table(
        "memory_fades",
        tenant_column(),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("cycle_id", sa.Uuid, nullable=False),
        sa.Column("faded_at", sa.DateTime(timezone=True)),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "memory_id", name="memory_fades_pkey"),
        schema=schema,
    )
    for table in ("decay_cycles", "memory_fades"):
        run("GRANT SELECT, INSERT, UPDATE ON {schema}.{t} TO {app}", t=table)
        isolate_tenants(table)
    allow_tenant_updates("memory_fades")
    op.create_table(
        "decay_cycle_claims",
        sa.Column("tenant_id", sa.Uuid, nullable=False),
        sa.Column("slot", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "slot", name="decay_cycle_claims_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT ON {schema}.decay_cycle_claims TO {app}")
