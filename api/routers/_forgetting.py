"""``/v1/forgetting``: a person as the forgetting pass's judge."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Request

from palimpsest.api._deps import AdminDep, CallerDep, ClockDep, RuntimeDep, WriteDep
from palimpsest.api._specs import requires
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.schemas import (
    JudgeItemsPublic,
    OperatorVerdict,
    PassRunCreate,
    PassRunPublic,
    VerdictsCreate,
    VerdictsRecorded,
)
from palimpsest.domain.errors import InvalidInputError, ItemsChangedError, PassDisabledError
from palimpsest.domain.judge_state import JudgeItem, MemoryView, PairItem, verdict_memories
from palimpsest.domain.proposal import dismissed
from palimpsest.domain.verdicts import Verdict
from palimpsest.projections.commands.proposals import ProposalSettings, ProposeSpec
from palimpsest.projections.drains.forgetting_pass import judge_items, run_pass
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.judgment.judge import Judge
from palimpsest.projections.judgment.settings import JudgeSettings, judge_from
from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates
from palimpsest.projections.views.operator_items import items_digest, operator_items

if TYPE_CHECKING:
    from palimpsest.projections.runtime import Runtime

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
def record_verdicts(body: VerdictsCreate, write: WriteDep, clock: ClockDep) -> dict[str, Any]:
    """Record verdicts a person gave (the operator judge), each with the confidence
    they state, as proposals of one run, all or nothing: a keep, or a verdict below its
    action's threshold (`PALIMPSEST_THRESHOLD_*`), is recorded `dismissed` (never
    listed by default, and not asked again until the memory's freshness moves); the
    others are `proposed`, for review at `/v1/proposals`. At most one open proposal per
    memory and action (409 `conflict`). A verdict names its memory by id
    (`memory_id`, `related_memory_id`) or its item by ref (`ref`, and `related_ref`
    for a single's supersede or conflict) with the listing's `items_digest`: 409
    `items-changed` when the items moved on since that listing (read them again)."""
    thresholds = ProposalSettings().thresholds()
    run_id = uuid4()
    judge = body.judge or f"operator:{write.caller.principal_name}"
    by_ref = _by_ref(write.runtime, write.caller.tenant_id, body, clock())
    specs = []
    for v in body.verdicts:
        seen: list[tuple[UUID, UUID | None, str | None]] | None = None
        if v.ref is None:
            assert v.memory_id is not None  # the schema's rule: one of memory_id or ref
            memory_id, related = v.memory_id, v.related_memory_id
        else:
            item = by_ref[v.ref]
            memory_id, related = verdict_memories(item, _as_verdict(v, judge))
            # What the person was shown, so a later change makes the proposal stale.
            seen = [(m.memory_id, m.version_id, m.content_digest) for m in _seen(item)]
        specs.append(
            ProposeSpec(
                memory_id=memory_id,
                verdict=v.action,
                related_memory_id=related,
                probability=v.confidence,
                distribution=None,
                model=judge,
                run_id=run_id,
                dismissed=dismissed(v.action, v.confidence, thresholds),
                note=v.note,
                seen=seen,
            )
        )
    result = write.perform_batch(body, specs)
    return {"run_id": run_id, "results": result["results"]}


def _as_verdict(v: OperatorVerdict, judge: str) -> Verdict:
    return Verdict(
        ref=str(v.ref),
        action=v.action,
        probability=v.confidence,
        distribution=None,
        model=judge,
        related_ref=v.related_ref,
    )


def _seen(item: JudgeItem) -> list[MemoryView]:
    if isinstance(item, PairItem):
        return [item.older, item.newer]
    return [item.memory, *item.newer]


def _items(runtime: Runtime, tenant_id: UUID, now: datetime) -> list[JudgeItem]:
    found = select_candidates(
        runtime.log, tenant_id, now=now, settings=PassSettings(), model_id=runtime.embedder.model_id
    )
    return judge_items(runtime.log, tenant_id, found)


def _by_ref(
    runtime: Runtime, tenant_id: UUID, body: VerdictsCreate, now: datetime
) -> dict[str, JudgeItem]:
    """Return the items now by ref, when a verdict names one.

    Raises:
        InvalidInputError: a verdict names a ref without the listing's digest, or a
            ref the listing does not hold.
        ItemsChangedError: the items moved on since the listing.
    """
    refs = [v.ref for v in body.verdicts if v.ref is not None]
    if not refs:
        return {}
    if body.items_digest is None:
        msg = "verdicts that name items by ref need the listing's items_digest"
        raise InvalidInputError(msg)
    items = _items(runtime, tenant_id, now)
    if items_digest(items) != body.items_digest:
        msg = (
            "the items to judge changed since that listing (another verdict, or a newer"
            " memory); read GET /v1/forgetting/items again"
        )
        raise ItemsChangedError(msg)
    by_ref = {item.ref: item for item in items}
    unknown = sorted({r for r in refs if r not in by_ref})
    if unknown:
        msg = f"no item {', '.join(unknown)} in the listing (refs are items', not neighbours')"
        raise InvalidInputError(msg)
    return by_ref


@router.get("/items", response_model=JudgeItemsPublic)
def read_items(caller: CallerDep, runtime: RuntimeDep, clock: ClockDep) -> JudgeItemsPublic:
    """Return what the forgetting pass would have judged now, for a person (the operator
    judge): stale singles with their newer neighbours and likely conflicting pairs,
    each side with its memory id, scope, project, whole content, recorded and
    last-touched times and evidence excerpts with their source. Answer with
    `POST /v1/forgetting/verdicts`, naming items by `ref` with this listing's
    `items_digest`. Reads only: nothing is judged or recorded. (A model judge is
    sent the lean state of docs/judge.md, not this.)"""
    now = clock()
    items = _items(runtime, caller.tenant_id, now)
    return JudgeItemsPublic(
        now=now,
        items_digest=items_digest(items),
        items=operator_items(runtime.log, caller.tenant_id, items, now=now),
    )


def _judge(request: Request) -> Judge | None:
    """Return the deployment's judge (made once per app); None for the operator judge
    (a person, through the API).

    Raises:
        PassDisabledError: the pass is off, or no judge is configured.
    """
    if not ForgettingPassSettings().forgetting_pass_enabled:
        msg = "the forgetting pass is off in this deployment (PALIMPSEST_FORGETTING_PASS_ENABLED)"
        raise PassDisabledError(msg)
    settings = JudgeSettings()
    if settings.judge == "none":
        msg = "no judge is configured (PALIMPSEST_JUDGE=none): there is no forgetting pass"
        raise PassDisabledError(msg)
    if settings.judge == "operator":
        return None
    state = request.app.state
    if getattr(state, "judge", None) is None:
        state.judge = judge_from(settings)
    judge: Judge = state.judge
    return judge


@router.post("/runs", response_model=PassRunPublic)
async def run_forgetting_pass(
    body: PassRunCreate, request: Request, caller: AdminDep, runtime: RuntimeDep, clock: ClockDep
) -> dict[str, Any]:
    """Run the forgetting pass over the caller's tenant now (admin), as the daily
    schedule does: candidates, the deployment's judge, proposals for review. Stops
    (and says why) when the tenant has not opted in, opts out, or its daily budget
    is spent. `dry_run` selects and renders only. With the operator judge
    (`PALIMPSEST_JUDGE=operator`) the items are `queued` for people at
    `GET /v1/forgetting/items`, and nothing is written. 409 `pass-disabled` when the
    deployment runs no pass (off, or `PALIMPSEST_JUDGE=none`). Can take minutes with a
    real model."""
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
