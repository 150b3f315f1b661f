"""``/v1/revision``: how far revision has caught up, for the caller's tenant."""

from __future__ import annotations

from fastapi import APIRouter

from palimpsest.api._deps import CallerDep, RuntimeDep
from palimpsest.api.schemas import RevisionStatusPublic
from palimpsest.projections.views.revision_status import RevisionStatus, revision_status

__all__ = [
    "read_revision_status",
    "router",
]

router = APIRouter(prefix="/v1/revision", tags=["revision"])


@router.get("", response_model=RevisionStatusPublic)
def read_revision_status(caller: CallerDep, runtime: RuntimeDep) -> RevisionStatus:
    """Return the tenant's log head, how many memories are dirty (pending revision), how
    long the oldest has waited, and how many memories drains published per second over
    the last minute."""
    return revision_status(runtime.log, caller.tenant_id)
