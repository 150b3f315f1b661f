"""``/v1/decisions``: explain one recorded decision."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from palimpsest.api._deps import CallerDep, RuntimeDep
from palimpsest.api.schemas import DecisionPublic
from palimpsest.projections.views.decision_records import DecisionRecord, decision_record

__all__ = [
    "read_decision",
    "router",
]

router = APIRouter(prefix="/v1/decisions", tags=["decisions"])


@router.get("/{decision_id}", response_model=DecisionPublic)
def read_decision(decision_id: UUID, caller: CallerDep, runtime: RuntimeDep) -> DecisionRecord:
    """Explain a decision: what it was asked to do (kind, subject, parameters, inputs),
    the versions and content digests it saw, who proposed and who recorded it, under
    which policy version, and which operations it accepted or refused."""
    return decision_record(runtime.log, caller.tenant_id, decision_id)
