"""``/v1/admin``: the service's resident state, for the tenant's administrators."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from api.deps import CallerDep, RuntimeDep
from api.schemas import CacheEvicted
from domain.errors import PermissionDeniedError
from domain.role import can_administer

__all__ = [
    "evict_cache",
    "router",
]

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.post("/cache/evict", response_model=CacheEvicted)
def evict_cache(caller: CallerDep, runtime: RuntimeDep) -> dict[str, Any]:
    """Evict this process's cached copies of the tenant's memories (the decoded
    versions as-of reads reuse). Nothing durable changes and no answer changes: the
    next read decodes again. Admin only."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot evict caches; an admin token is required"
        raise PermissionDeniedError(msg)
    cache = runtime.version_cache
    evicted = cache.evict(caller.tenant_id)
    stats = cache.stats()
    return {"evicted": evicted, "entries": stats.entries, "max_entries": stats.max_entries}
