"""``/v1/admin``: the service's resident state, for the tenant's administrators."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from palimpsest.api._deps import AdminDep, RuntimeDep
from palimpsest.api.schemas import CacheEvicted
from palimpsest.projections.recall.query_vectors import query_vectors
from palimpsest.projections.store.aggregate_cache import aggregate_cache

__all__ = [
    "evict_cache",
    "router",
]

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.post("/cache/evict", response_model=CacheEvicted)
def evict_cache(caller: AdminDep, runtime: RuntimeDep) -> dict[str, Any]:
    """Evict this process's cached copies of the tenant's memories (the decoded
    versions as-of reads reuse, and the aggregates writes and drains start from) and
    of its recall queries' embeddings.
    Nothing durable changes and no answer changes: the next read decodes again. Admin
    only."""
    cache = runtime.version_cache
    evicted = cache.evict(caller.tenant_id)
    aggregates = aggregate_cache(runtime.log).evict(caller.tenant_id)
    queries = query_vectors(runtime.embedder).evict(caller.tenant_id)
    stats = cache.stats()
    return {
        "evicted": evicted,
        "entries": stats.entries,
        "max_entries": stats.max_entries,
        "aggregates_evicted": aggregates,
        "query_vectors_evicted": queries,
    }
