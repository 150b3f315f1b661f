"""Alembic revisions, one a file, oldest first (``0001`` … ): the schema's history."""

from __future__ import annotations

__all__: list[str] = []
