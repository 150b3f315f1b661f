"""Consolidation: reflections kept apart (placeholder until consolidation lands).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

__all__ = ["upgrade"]

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Nothing yet."""
