"""Quarantine: a memory the revision drain cannot project is set aside, with its error.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from palimpsest.projections.store.migrations._ddl import target

__all__ = ["upgrade"]

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Record, per memory, the requested revision the drain failed to project and why.

    While ``unprojectable_at`` equals ``requested`` the drain skips the memory
    and reads answer ``unprojectable`` with the error; a later write raises
    ``requested`` and the drain tries again.
    """
    schema = target().schema
    op.add_column("revisions", sa.Column("unprojectable_at", sa.BigInteger), schema=schema)
    op.add_column("revisions", sa.Column("unprojectable_error", sa.Text), schema=schema)
    op.create_index(
        "revisions_unprojectable",
        "revisions",
        ["tenant_id"],
        schema=schema,
        postgresql_where=sa.text("unprojectable_at = requested"),
    )
