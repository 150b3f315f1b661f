"""``/v1/admin``: the service's resident state."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["CacheEvicted"]


class CacheEvicted(BaseModel):
    """What an eviction dropped, and what the process's version cache holds now (all
    tenants)."""

    evicted: int
    """Decoded versions dropped (the as-of reads' cache)."""
    entries: int
    max_entries: int
    aggregates_evicted: int = 0
    """Resident aggregates dropped (the write side's copies, fast-forwarded on use)."""
    query_vectors_evicted: int = 0
    """Recall queries' remembered embeddings dropped."""
