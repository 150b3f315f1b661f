"""Recall by words: the full-text index over current versions (placeholder until it lands).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

__all__ = ["upgrade"]

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Nothing yet."""
