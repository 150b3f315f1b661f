"""``/v1/admin``: the service's resident state."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["CacheEvicted"]


class CacheEvicted(BaseModel):
    """What an eviction dropped, and what the process's cache holds now (all tenants)."""

    evicted: int
    entries: int
    max_entries: int
