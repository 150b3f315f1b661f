"""``/v1/forgetting``: a person as the forgetting pass's judge."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import uuid4

from fastapi import APIRouter, Depends, Request

from palimpsest.api.deps import AdminDep, CallerDep, ClockDep, RuntimeDep, WriteDep
from palimpsest.api.schemas import (
    JudgeItemsPublic,
    PassRunCreate,
    PassRunPublic,
    VerdictsCreate,
    VerdictsRecorded,
)
from palimpsest.api.specs import requires
from palimpsest.api.worker_threads import in_thread
from palimpsest.domain.errors import PassDisabledError
from palimpsest.domain.judge_state import render_state
from palimpsest.domain.proposal import dismissed
from palimpsest.projections.commands.proposals import ProposalSettings, ProposeSpec
from palimpsest.projections.drains.forgetting_pass import judge_items, run_pass
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.judgment.judge import Judge
from palimpsest.projections.judgment.settings import JudgeSettings, judge_from
from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates

__all__ = [
    "read_items",
    "record_verdicts",
    "router",
    "run_forgetting_pass",
]

router = APIRouter(prefix="/v1/forgetting", tags=["forgetting"])


@router.post(
    "/verdicts",
    status_code=201,
    response_model=VerdictsRecorded,
    dependencies=[Depends(requires(ProposeSpec))],
)
def record_verdicts(body: VerdictsCreate, write: WriteDep) -> dict[str, Any]:
    """Record verdicts a person gave (the operator judge), each with the confidence
    they state, as proposals of one run, all or nothing: a keep, or a verdict below its
    action's threshold (`PALIMPSEST_THRESHOLD_*`), is recorded `dismissed` (never
    listed by default, and not asked again until the memory's freshness moves); the
    others are `proposed`, for review at `/v1/proposals`. At most one open proposal per
    memory and action (409 `conflict`)."""
    thresholds = ProposalSettings().thresholds()
    run_id = uuid4()
    judge = body.judge or f"operator:{write.caller.principal_name}"
    specs = [
        ProposeSpec(
            memory_id=v.memory_id,
            verdict=v.action,
            related_memory_id=v.related_memory_id,
            probability=v.confidence,
            distribution=None,
            model=judge,
            run_id=run_id,
            dismissed=dismissed(v.action, v.confidence, thresholds),
            note=v.note,
        )
        for v in body.verdicts
    ]
    result = write.perform_batch(body, specs)
    return {"run_id": run_id, "results": result["results"]}


@router.get("/items", response_model=JudgeItemsPublic)
def read_items(caller: CallerDep, runtime: RuntimeDep, clock: ClockDep) -> JudgeItemsPublic:
    """Return what the forgetting pass would send a judge now, rendered as it sends it
    (stale singles with their newer neighbours, likely conflicting pairs; content cut
    as for a model): what an operator judges before answering with
    `POST /v1/forgetting/verdicts`. Reads only: nothing is judged or recorded."""
    now = clock()
    found = select_candidates(
        runtime.log,
        caller.tenant_id,
        now=now,
        settings=PassSettings(),
        model_id=runtime.embedder.model_id,
    )
    state = render_state(now, judge_items(runtime.log, caller.tenant_id, found))
    items = state["items"]
    assert isinstance(items, list)
    return JudgeItemsPublic(now=now, items=[dict(i) for i in items if isinstance(i, dict)])


def _judge(request: Request) -> Judge:
    """Return the deployment's judge (made once per app).

    Raises:
        PassDisabledError: the pass is off, or no judge is configured.
    """
    if not ForgettingPassSettings().forgetting_pass_enabled:
        msg = "the forgetting pass is off in this deployment (PALIMPSEST_FORGETTING_PASS_ENABLED)"
        raise PassDisabledError(msg)
    state = request.app.state
    if getattr(state, "judge", None) is None:
        state.judge = judge_from(JudgeSettings())
    if state.judge is None:
        msg = "no judge is configured (PALIMPSEST_JUDGE): there is no forgetting pass"
        raise PassDisabledError(msg)
    judge: Judge = state.judge
    return judge


@router.post("/runs", response_model=PassRunPublic)
async def run_forgetting_pass(
    body: PassRunCreate, request: Request, caller: AdminDep, runtime: RuntimeDep, clock: ClockDep
) -> dict[str, Any]:
    """Run the forgetting pass over the caller's tenant now (admin), as the daily
    schedule does: candidates, the deployment's judge, proposals for review. Stops
    (and says why) when the tenant has not opted in, opts out, or its daily budget
    is spent. `dry_run` selects and renders only. 409 `pass-disabled` when the
    deployment runs no pass (off, or no judge). Can take minutes with a real model."""
    judge = _judge(request)
    writer = request.app.state.writer
    report = await in_thread(
        run_pass,
        runtime.log,
        writer,
        caller.tenant_id,
        judge,
        now=clock(),
        candidates=PassSettings(),
        proposals=ProposalSettings(),
        model_id=runtime.embedder.model_id,
        dry_run=body.dry_run,
    )
    result = asdict(report)
    result.pop("tenant_id")
    return result
