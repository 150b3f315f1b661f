"""Query vectors: a recall's query embedded once per embedder, then remembered.

An agent asks the same questions again ("what does the user prefer?"), and a query's
embedding is most of a recall's time on a CPU. Each embedder gets a bounded LRU of the
vectors of the queries it embedded, keyed by tenant and exact text: a repeated query
costs a dictionary lookup. By tenant, although a vector depends on the text alone: a
tenant must not learn from a recall's speed what another asked, and a tenant's cached
copies go with ``POST /v1/admin/cache/evict``. Per embedder object, so a process that
swaps its model (a reindex to another model) never serves one model's vector for
another's query. It holds queries, never memories' text.

The vectors are kept as arrays of doubles, not lists of floats: the cyclic garbage
collector walks every reference of the objects it tracks in each full collection, and
a full cache of lists held 393,216 floats, which made each full collection of a serving
process take 10 to 22 ms (the slowest recalls among 100,000 memories, docs/recall.md).
An array is not tracked and holds its doubles exactly; a hit returns a new list of
them.
"""

from __future__ import annotations

import threading
import weakref
from array import array
from collections import OrderedDict
from uuid import UUID

from palimpsest.projections.recall.embedders import Embedder

__all__ = ["QUERY_VECTORS", "QueryVectors", "query_vectors"]

QUERY_VECTORS = 1024
"""Queries remembered per embedder: 1024 vectors of 384 doubles are about 3 MB."""


class QueryVectors:
    """The LRU of one embedder's query vectors, with its hit and miss counts."""

    def __init__(self, size: int = QUERY_VECTORS) -> None:
        self.size = size
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[tuple[UUID, str], array[float]] = OrderedDict()
        self._lock = threading.Lock()

    def figures(self) -> dict[str, float]:
        """Entries held, hits and misses since the process started, for ``/metrics``."""
        with self._lock:
            return {"entries": len(self._vectors), "hits": self.hits, "misses": self.misses}

    def clear(self) -> None:
        """Forget every vector (hits and misses stay counted)."""
        with self._lock:
            self._vectors.clear()

    def evict(self, tenant_id: UUID) -> int:
        """Forget ``tenant_id``'s queries; return how many there were."""
        with self._lock:
            mine = [key for key in self._vectors if key[0] == tenant_id]
            for key in mine:
                del self._vectors[key]
        return len(mine)

    def remembered(self, tenant_id: UUID, text: str) -> list[float] | None:
        """Return the vector remembered for ``text`` asked by ``tenant_id`` (a hit), or
        None (not counted: :meth:`vector` counts the miss when it embeds)."""
        key = (tenant_id, text)
        with self._lock:
            found = self._vectors.get(key)
            if found is None:
                return None
            self._vectors.move_to_end(key)
            self.hits += 1
        return found.tolist()

    def vector(self, embedder: Embedder, tenant_id: UUID, text: str) -> list[float]:
        """Return ``text``'s unit vector by ``embedder`` (whose cache this is), asked
        by ``tenant_id``: remembered, or embedded now and remembered.

        Raises:
            EmbedderUnavailableError: the query had to be embedded, and could not be.
        """
        found = self.remembered(tenant_id, text)
        if found is not None:
            return found
        with self._lock:
            self.misses += 1
        # Embedded outside the lock: two recalls of one new query may both embed it,
        # which costs less than making every other recall wait for the model.
        vector = embedder.embed([text])[0]
        key = (tenant_id, text)
        with self._lock:
            self._vectors[key] = array("d", vector)
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        return vector


_CACHES: dict[int, QueryVectors] = {}
"""Each live embedder's cache, by the embedder's ``id`` (embedders need not be
hashable); an embedder's entry goes when it is collected."""
_CACHES_LOCK = threading.Lock()


def query_vectors(embedder: Embedder) -> QueryVectors:
    """Return ``embedder``'s query vectors (made on first use, gone with the embedder)."""
    key = id(embedder)
    with _CACHES_LOCK:
        cache = _CACHES.get(key)
        if cache is None:
            cache = _CACHES[key] = QueryVectors()
            weakref.finalize(embedder, _forget, key)
        return cache


def _forget(key: int) -> None:
    with _CACHES_LOCK:
        _CACHES.pop(key, None)
