"""``/v1/cycles``: the decay cycle, run on demand and read back."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request

from palimpsest.api._deps import AdminDep, CallerDep, ClockDep, RuntimeDep
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.schemas._cycles import CycleCreate, CyclePublic
from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.drains.decay_cycle import run_cycle
from palimpsest.projections.views.cycles import annotated, cycle_report

__all__ = ["read_cycle", "router", "run_decay_cycle"]

router = APIRouter(prefix="/v1/cycles", tags=["cycles"])


@router.post("", response_model=CyclePublic, response_model_exclude_none=True)
async def run_decay_cycle(
    body: CycleCreate, request: Request, caller: AdminDep, runtime: RuntimeDep, clock: ClockDep
) -> dict[str, Any]:
    """Run the decay cycle over the caller's tenant now (admin), whatever its policy's
    schedule says: every live memory scored at one snapshot time and bucketed keep,
    fade or prune; likely duplicates forced into prune first; fades recorded; prunes
    proposed for review (`GET /v1/proposals`), or archived with reason `decayed`
    where the policy's `auto_archive_decayed` is on; then the survivors consolidated.
    Recorded as `CycleCompleted`, and what consolidation did as `CycleConsolidated`
    (read both back at `GET /v1/cycles/{id}`). `dry_run`
    returns the report with every memory's score and writes nothing. Every memory the
    report names is in `memories` with its text, each proposal in `proposed` with its
    memory, and what factors and buckets mean in `factors_explained` and
    `buckets_explained`."""
    report = await in_thread(
        run_cycle,
        runtime.log,
        request.app.state.writer,
        caller.tenant_id,
        now=clock(),
        model_id=runtime.embedder.model_id,
        dry_run=body.dry_run,
    )
    result = report.as_dict()
    result.pop("tenant_id")
    return await in_thread(annotated, runtime.log, caller.tenant_id, result)


@router.get("/{cycle_id}", response_model=CyclePublic, response_model_exclude_none=True)
def read_cycle(cycle_id: UUID, caller: CallerDep, runtime: RuntimeDep) -> dict[str, Any]:
    """Return a recorded cycle's report (any role of its tenant): its snapshot time,
    policy version, counts per bucket and per type, duplicates, fades, proposals and
    archivals, `held_back`, `importance_fallbacks` and `consolidation`, as the run
    answered them, with the texts beside the ids (`memories`, `proposed`).
    `consolidation` is absent while the survivors are being consolidated (it is
    recorded once that ends), and `held_back` and `importance_fallbacks` for cycles
    recorded before the log carried them. 404 `not-found` for another tenant's
    cycle, or a dry run (never recorded)."""
    found = cycle_report(runtime.log, caller.tenant_id, cycle_id)
    if found is None:
        msg = f"cycle {cycle_id} not found"
        raise NotFoundError(msg)
    return annotated(runtime.log, caller.tenant_id, found)
