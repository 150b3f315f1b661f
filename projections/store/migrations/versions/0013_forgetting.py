"""The forgetting pass: its proposals, its judges' daily usage, and its daily runs.

Revision ID: 0013
Revises: 0012
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

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """One row per ``RetentionProposed`` event, written in its write's transaction like
    every dependency row: what is proposed for which memory, its status, and when.
    The verdict's details (distribution, what the judge saw) stay in the event.

    At most one open (``proposed``) proposal per memory and action. The runtime
    role reads, adds and updates (a decision moves a status); it never deletes.
    """
    schema = target().schema
    op.create_table(
        "retention_proposals",
        tenant_column(),
        sa.Column("proposal_id", sa.Uuid, nullable=False),
        sa.Column("memory_id", sa.Uuid, nullable=False),
        sa.Column("related_memory_id", sa.Uuid),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("probability", sa.Float),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("run_id", sa.Uuid, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("decision_id", sa.Uuid),
        sa.Column("decided_at", sa.DateTime(timezone=True)),
        sa.Column("decided_position", sa.BigInteger),
        # What applying it did: archive (forgot a memory), supersede (an edge archived
        # one), or null; the collapse guard counts a day's archivals from it.
        sa.Column("effect", sa.Text),
        sa.PrimaryKeyConstraint("tenant_id", "proposal_id", name="retention_proposals_pkey"),
        sa.CheckConstraint(
            "action IN ('keep', 'archive', 'supersede', 'conflict')",
            name="retention_proposals_action",
        ),
        sa.CheckConstraint(
            "status IN ('proposed', 'applied', 'rejected', 'dismissed')",
            name="retention_proposals_status",
        ),
        sa.CheckConstraint(
            "(action IN ('supersede', 'conflict')) = (related_memory_id IS NOT NULL)",
            name="retention_proposals_related",
        ),
        schema=schema,
    )
    op.create_index(
        "retention_proposals_open",
        "retention_proposals",
        ["tenant_id", "memory_id", "action"],
        unique=True,
        schema=schema,
        postgresql_where=sa.text("status = 'proposed'"),
    )
    op.create_index(
        "retention_proposals_review",
        "retention_proposals",
        ["tenant_id", "status", sa.text("position DESC")],
        schema=schema,
    )
    op.create_index(
        "retention_proposals_memory",
        "retention_proposals",
        ["tenant_id", "memory_id"],
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.retention_proposals TO {app}")
    isolate_tenants("retention_proposals")
    allow_tenant_updates("retention_proposals")
    _usage_and_runs(schema)


def _usage_and_runs(schema: str) -> None:
    """Each tenant's judge calls and tokens per UTC day (reserved before a call,
    corrected to what the server reported after it, released on failure), and one
    row per scheduled day the pass was started: whichever scheduler inserts it first
    runs that day's pass, so any number of processes may schedule it."""
    op.create_table(
        "judge_usage",
        tenant_column(),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("calls", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("tenant_id", "day", name="judge_usage_pkey"),
        sa.CheckConstraint("calls >= 0 AND tokens >= 0", name="judge_usage_check"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.judge_usage TO {app}")
    isolate_tenants("judge_usage")
    allow_tenant_updates("judge_usage")
    # Days and times only, no tenant data: no row-level security, like revision_tenants.
    op.create_table(
        "forgetting_runs",
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.PrimaryKeyConstraint("day", name="forgetting_runs_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.forgetting_runs TO {app}")
