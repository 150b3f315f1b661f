"""Dramatiq drains. The revision drain arrives with issue 3."""

from __future__ import annotations

__all__: list[str] = []
