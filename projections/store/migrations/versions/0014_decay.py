"""The decay cycle: its runs (placeholder until the decay cycle lands).

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

__all__ = ["upgrade"]

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Nothing yet."""
