"""A process's resident copies of what the log implies: a bounded, tenant-keyed LRU.

Every entry is a copy of something the log determines (a memory decoded at a
version, an aggregate at its version), keyed by a tuple that starts with the
tenant and the aggregate: eviction, by tenant or by memory, changes no durable
row and no answer; a miss only costs the decode again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar
from uuid import UUID

__all__ = ["CacheStats", "ResidentCache"]

_K = TypeVar("_K", bound=tuple[UUID, UUID] | tuple[UUID, UUID, int])
_V = TypeVar("_V")


@dataclass(frozen=True)
class CacheStats:
    """How a cache is doing, since the process started."""

    entries: int
    max_entries: int
    hits: int
    misses: int
    evicted: int


class ResidentCache(Generic[_K, _V]):
    """A thread-safe LRU whose keys start with (tenant, aggregate id).

    Values are stored and returned as they are: a caller that changes what it got
    must copy it first (or store only values nobody changes).
    """

    def __init__(self, max_entries: int) -> None:
        self._entries: OrderedDict[_K, _V] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_entries
        self._hits = self._misses = self._evicted = 0

    def get(self, key: _K) -> _V | None:
        """Return the cached value, if any (and count a hit or a miss)."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return found

    def put(self, key: _K, value: _V) -> None:
        """Remember ``value``, dropping the least recently used entries beyond the bound."""
        with self._lock:
            if self._max <= 0:
                return
            self._entries[key] = value
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
