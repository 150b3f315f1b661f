"""The one resident cache: decoded memories at a version, for as-of reads.

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
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

from domain.belief import MemoryFacts

if TYPE_CHECKING:
    from projections.store.eventlog import EventLog

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


@dataclass(frozen=True)
class CacheStats:
    """How the cache is doing, since the process started."""

    entries: int
    max_entries: int
    hits: int
    misses: int
    evicted: int


class VersionCache:
    """A thread-safe LRU of a memory's facts (without edges) by version."""

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[Key, MemoryFacts] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self._hits = self._misses = self._evicted = 0

    def get(self, key: Key) -> MemoryFacts | None:
        """Return the cached facts, if any (and count a hit or a miss)."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return found

    def put(self, key: Key, facts: MemoryFacts) -> None:
        """Remember ``facts``, dropping the least recently used entries beyond the bound."""
        with self._lock:
            if self._max <= 0:
                return
            self._entries[key] = facts
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
                self._evicted += 1

    def resize(self, max_entries: int) -> None:
        """Change the bound (0 disables the cache), dropping entries beyond it."""
        with self._lock:
            self._max = max_entries
            while len(self._entries) > max(self._max, 0):
                self._entries.popitem(last=False)
                self._evicted += 1

    def evict(self, tenant_id: UUID, memory_ids: set[UUID] | None = None) -> int:
        """Drop a tenant's entries (only those of ``memory_ids``, if given); return how many."""
        with self._lock:
            doomed = [
                k
                for k in self._entries
                if k[0] == tenant_id and (memory_ids is None or k[1] in memory_ids)
            ]
            for key in doomed:
                del self._entries[key]
            self._evicted += len(doomed)
            return len(doomed)

    def stats(self) -> CacheStats:
        """Return the cache's figures."""
        with self._lock:
            return CacheStats(
                len(self._entries), self._max, self._hits, self._misses, self._evicted
            )


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
