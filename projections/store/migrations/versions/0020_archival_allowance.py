"""The collapse guard's daily allowance, and a lease on the forgetting pass's day.

Revision ID: 0020
Revises: 0019
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

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Each tenant's memories archived per UTC day by applied proposals, the decay
    cycle's automatic archives and consolidation's automatic merges, reserved in the
    transaction of each write that archives them: the collapse guard's allowance
    (``projections/store/archival_allowance.py``). Operational like ``judge_usage``:
    the runtime role reads, adds and updates its tenant's rows; it never deletes.

    ``forgetting_runs.held_until``: how long the claim of a day's forgetting pass
    holds. A day neither finished nor held any longer is claimed again by the next
    scheduled run, so a pass that died (or met a database error) does not skip its
    day. Days claimed before this revision have none: unfinished, they may be
    claimed again at once.
    """
    schema = target().schema
    op.create_table(
        "archival_allowance",
        tenant_column(),
        sa.Column("day", sa.Date, nullable=False),
        sa.Column("archived", sa.BigInteger, nullable=False, server_default=sa.text("0")),
        sa.PrimaryKeyConstraint("tenant_id", "day", name="archival_allowance_pkey"),
        sa.CheckConstraint("archived >= 0", name="archival_allowance_check"),
        schema=schema,
    )
    run("GRANT SELECT, INSERT, UPDATE ON {schema}.archival_allowance TO {app}")
    isolate_tenants("archival_allowance")
    allow_tenant_updates("archival_allowance")
    op.add_column(
        "forgetting_runs",
        sa.Column("held_until", sa.DateTime(timezone=True)),
        schema=schema,
    )
