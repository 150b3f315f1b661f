"""Decoded memories at a version, for as-of reads (one of the two resident caches;
the other holds the write side's aggregates: :mod:`palimpsest.projections.store.aggregate_cache`).

Loading a long memory at a version decodes a snapshot holding every version
and contribution; repeated as-of reads of a memory hit the same few
versions. What a memory was at a version never changes, so an entry is
never stale; erasure (which removes content, not versions) will evict.

The cache is bounded (least recently used entries go first) and evictable
per tenant. Eviction changes no durable row and no answer: a miss only costs
the decode again.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.domain.belief import MemoryFacts
from palimpsest.projections.store.resident import CacheStats, ResidentCache

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "CacheStats",
    "DEFAULT_CACHE_ENTRIES",
    "VersionCache",
    "cache_for",
]

DEFAULT_CACHE_ENTRIES = 10_000
"""Decoded memories kept for as-of reads, unless configured otherwise."""

Key = tuple[UUID, UUID, int]
"""(tenant, memory, aggregate version)."""


class VersionCache(ResidentCache[Key, MemoryFacts]):
    """A thread-safe LRU of a memory's facts (without edges) by version."""


_caches: weakref.WeakKeyDictionary[EventLog, VersionCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def cache_for(log: EventLog) -> VersionCache:
    """Return the version cache of ``log``'s process (one per event log, made on first use).

    The cache is a view's, not the log's: the log stays a writer of events,
    and the cache lives exactly as long as the log it decodes.
    """
    with _caches_lock:
        cache = _caches.get(log)
        if cache is None:
            cache = _caches[log] = VersionCache(DEFAULT_CACHE_ENTRIES)
        return cache
