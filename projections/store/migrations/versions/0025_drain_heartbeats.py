"""The drains' heartbeats: when each drain last completed a pass, and where.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import run, target

__all__ = ["upgrade"]

revision = "0025"
down_revision: str | None = "0024"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """One row per drain (a dramatiq actor's name): the worker (host and pid) that last
    completed a pass of it, and when. ``/readyz`` with external drains turns unready
    when work waits and no row is recent (a worker pool that died). No tenant data,
    no row-level security, like ``forgetting_runs``: the runtime role reads, adds and
    updates the rows.
    """
    schema = target().schema
    op.create_table(
        "drain_heartbeats",
        sa.Column("drain", sa.Text, nullable=False),
        sa.Column("worker", sa.Text, nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("drain", name="drain_heartbeats_pkey"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.drain_heartbeats TO {app}")
