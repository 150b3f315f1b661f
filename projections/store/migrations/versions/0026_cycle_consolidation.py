"""A decay cycle's consolidation, recorded: ``decay_cycles.consolidation``.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

from palimpsest.projections.store.migrations._ddl import allow_tenant_updates, target

__all__ = ["upgrade"]

revision = "0026"
down_revision: str | None = "0025"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Give each cycle's row what consolidating its survivors did, as its
    ``CycleConsolidated`` event records it (null until then, and for every cycle
    recorded before the event existed: no store holds one to fill it from).

    Why: consolidation runs after the cycle's own write, so its summary is a second
    event of the cycle; ``GET /v1/cycles/{id}`` answers it as the run did. The row is
    updated when that event is recorded, so the runtime role may now update its own
    tenant's rows.
    """
    schema = target().schema
    op.add_column("decay_cycles", sa.Column("consolidation", JSONB), schema=schema)
    allow_tenant_updates("decay_cycles")
