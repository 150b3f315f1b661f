"""Recall's ``project_under`` filter: the project and everything below it.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

from alembic import op

from palimpsest.projections.store.migrations._ddl import target

__all__ = ["upgrade"]

revision = "0023"
down_revision: str | None = "0022"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Index the project of recall's vectors and words with ``text_pattern_ops``.

    A prefix is a range only in an order by code point; the database's collation
    need not be one (``en_US`` skips punctuation at first), so its btree indexes on
    ``project`` cannot serve ``project_under``. The pattern operator class orders
    by bytes whatever the collation. Without these, a LangGraph namespace in a store
    of many read every row of its scope.
    """
    schema = target().schema
    op.create_index(
        "memory_embeddings_tenant_id_model_id_project_pattern_idx",
        "memory_embeddings",
        ["tenant_id", "model_id", "project"],
        schema=schema,
        postgresql_ops={"project": "text_pattern_ops"},
    )
    op.create_index(
        "memory_texts_tenant_id_project_pattern_idx",
        "memory_texts",
        ["tenant_id", "project"],
        schema=schema,
        postgresql_ops={"project": "text_pattern_ops"},
    )
