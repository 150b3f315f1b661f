"""Recall filter indexes.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

from palimpsest.projections.store.migrations._ddl import target
from palimpsest.projections.store.schema import EMBEDDINGS_TABLE

__all__ = ["upgrade"]

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Index recall's filters on scope or project alone.

    A selective filter on scope or project alone falls back to exact search
    (docs/recall.md); without these it read every row of the tenant's model.
    """
    schema = target().schema
    for column in ("project", "scope"):
        op.create_index(
            f"{EMBEDDINGS_TABLE}_tenant_id_model_id_{column}_idx",
            EMBEDDINGS_TABLE,
            ["tenant_id", "model_id", column],
            schema=schema,
        )
