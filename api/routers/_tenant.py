"""``/v1/tenant``: the caller's tenant as a whole."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import StreamingResponse

from palimpsest.api._deps import (
    AdminDep,
    CallerDep,
    ClockDep,
    RuntimeDep,
    UnkeyedWriteDep,
    WriteDep,
    WriterDep,
)
from palimpsest.api._specs import requires, retention_spec, tenant_deletion_spec
from palimpsest.api.schemas import (
    ErasureReceipt,
    JudgmentPublic,
    JudgmentUpdate,
    Label,
    Reason,
    RetentionPublic,
    RetentionUpdate,
    TenantDeletion,
)
from palimpsest.api.schemas._cycles import (
    ForgettingPolicyPatch,
    ForgettingPolicyPublic,
    ForgettingPolicyUpdate,
)
from palimpsest.domain.errors import ConfirmationRequiredError
from palimpsest.projections.commands.forgetting_policy import ForgettingPolicySpec, forgetting_for
from palimpsest.projections.commands.judgment import JudgmentSpec, judgment_for, tenant_name
from palimpsest.projections.commands.tenant_deletion import confirmation_token
from palimpsest.projections.commands.writer import RetentionSpec
from palimpsest.projections.drains.judge_budget import usage_on
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.export import export_tenant
from palimpsest.projections.views.receipts import Receipt, erasure_receipt

__all__ = [
    "delete_tenant",
    "export",
    "patch_forgetting",
    "read_forgetting",
    "read_judgment",
    "read_retention",
    "router",
    "update_forgetting",
    "update_judgment",
    "update_retention",
]

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])


@router.get("/export", response_class=StreamingResponse)
def export(caller: AdminDep, runtime: RuntimeDep, clock: ClockDep) -> StreamingResponse:
    """Stream everything the tenant owns as JSON lines (`application/x-ndjson`), read
    in one consistent snapshot: a header, every event oldest first (references and
    digests, as the event feed shows them), every payload that still exists (contents
    by digest), and a trailer with the counts. Admin only."""
    lines = export_tenant(runtime.log, caller.tenant_id, clock())
    first = next(lines)  # opens the snapshot now: a failure is a clean error, not a cut stream

    def body() -> Iterator[str]:
        yield json.dumps(first.model_dump(mode="json", by_alias=True)) + "\n"
        for line in lines:
            yield json.dumps(line.model_dump(mode="json", by_alias=True)) + "\n"

    return StreamingResponse(
        body(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="palimpsest-export.jsonl"'},
    )


def _hours(value: timedelta) -> int:
    return int(value / timedelta(hours=1))


@router.get("/retention", response_model=RetentionPublic, response_model_exclude_none=True)
def read_retention(caller: CallerDep, writer: WriterDep) -> dict[str, Any]:
    """Return the retention new observations get (the tenant's own if it set one,
    else the deployment's) and the deployment's maxima."""
    raw, transient = writer.retention(caller.tenant_id)
    return {
        "raw_hours": _hours(raw),
        "transient_hours": _hours(transient),
        "max_raw_hours": _hours(writer.policy.raw_retention),
        "max_transient_hours": _hours(writer.policy.transient_retention),
    }


@router.put(
    "/retention",
    response_model=RetentionPublic,
    dependencies=[Depends(requires(RetentionSpec))],
)
def update_retention(body: RetentionUpdate, response: Response, write: WriteDep) -> dict[str, Any]:
    """Set the tenant's retention of observation bytes (admin, within the deployment's
    maxima). New captures take it at once. A shortening also applies to deadlines not
    yet passed: the retention drain moves each earlier (never before now) and records
    it. A lengthening never extends a deadline already set."""
    result = write.perform(body, retention_spec(body))
    response.status_code = 200
    return {
        **result,
        "max_raw_hours": _hours(write.writer.policy.raw_retention),
        "max_transient_hours": _hours(write.writer.policy.transient_retention),
    }


def _judgment(runtime: Runtime, tenant_id: UUID, clock: Callable[[], datetime]) -> JudgmentPublic:
    policy = judgment_for(runtime.log, tenant_id)
    calls, tokens = usage_on(runtime.log, tenant_id, clock().astimezone(UTC).date())
    return JudgmentPublic(
        tenant_id=tenant_id,
        tenant_name=tenant_name(runtime.log, tenant_id),
        enabled=policy.enabled,
        daily_calls=policy.daily_calls,
        daily_tokens=policy.daily_tokens,
        used_calls=calls,
        used_tokens=tokens,
    )


@router.get("/judgment", response_model=JudgmentPublic)
def read_judgment(caller: CallerDep, runtime: RuntimeDep, clock: ClockDep) -> JudgmentPublic:
    """Return whether the tenant opted in to the forgetting pass (not until an
    administrator does), its daily budget of judge calls and tokens, and today's use."""
    return _judgment(runtime, caller.tenant_id, clock)


@router.put(
    "/judgment",
    response_model=JudgmentPublic,
    dependencies=[Depends(requires(JudgmentSpec))],
)
def update_judgment(
    body: JudgmentUpdate, response: Response, write: WriteDep, clock: ClockDep
) -> JudgmentPublic:
    """Opt the tenant in or out of the forgetting pass (admin), with its daily budget.
    The pass reads this immediately before every call to its judge: an opt-out stops
    a pass that is running at its next call. With a budget spent, the pass stops for
    the day (it never spends past it)."""
    spec = JudgmentSpec(body.enabled, body.daily_calls, body.daily_tokens)
    write.perform(body, spec)
    response.status_code = 200
    return _judgment(write.runtime, write.caller.tenant_id, clock)


@router.get("/forgetting", response_model=ForgettingPolicyPublic)
def read_forgetting(caller: CallerDep, runtime: RuntimeDep) -> dict[str, Any]:
    """Return the tenant's forgetting policy: the decay cycle's schedule, weights,
    half-lives, importance floor, thresholds and consolidation switches (the defaults,
    `version` 0, until an administrator sets one; docs/forgetting.md#policy)."""
    policy = forgetting_for(runtime.log, caller.tenant_id)
    return {**policy.as_values(), "version": policy.version}


@router.put(
    "/forgetting",
    response_model=ForgettingPolicyPublic,
    dependencies=[Depends(requires(ForgettingPolicySpec))],
)
def update_forgetting(
    body: ForgettingPolicyUpdate, response: Response, write: WriteDep
) -> dict[str, Any]:
    """Replace the tenant's whole forgetting policy (admin): a field left out takes its
    default, not its previous value (`PATCH` changes only the fields it names).
    Recorded (`ForgettingPolicySet`) with a new `version`, which every later cycle
    records. A bad policy (an unknown field, a value of the wrong kind or out of its
    range: 422 `invalid-input`; `prune_below` above `fade_below`: 422
    `inconsistent-policy`) is refused whole, writing nothing."""
    result = write.perform(body, ForgettingPolicySpec(body.model_dump()))
    response.status_code = 200
    result.pop("position", None)
    return result


@router.patch(
    "/forgetting",
    response_model=ForgettingPolicyPublic,
    dependencies=[Depends(requires(ForgettingPolicySpec))],
)
def patch_forgetting(
    body: ForgettingPolicyPatch, response: Response, write: WriteDep
) -> dict[str, Any]:
    """Change some fields of the tenant's forgetting policy (admin): every field, weight
    and half-life left out keeps its current value, so `{"enabled": false}` turns the
    schedule off and keeps tuned thresholds. The merged policy is checked whole, as a
    `PUT` is (422 `invalid-input`, 422 `inconsistent-policy`, nothing written), and
    recorded with a new `version`."""
    changes = body.model_dump(exclude_none=True)
    result = write.perform(body, ForgettingPolicySpec(changes, merge=True))
    response.status_code = 200
    result.pop("position", None)
    return result


@router.delete(
    "",
    response_model=ErasureReceipt,
    status_code=202,
    responses={
        428: {
            "description": "Confirmation required: repeat with `confirm` set to the "
            "problem's `confirmation_token` (nothing was written).",
            "content": {"application/problem+json": {}},
        }
    },
)
def delete_tenant(
    response: Response,
    caller: AdminDep,
    write: UnkeyedWriteDep,
    confirm: Annotated[
        Label | None,
        Query(description="The confirmation token a first call returned (any other: 428)."),
    ] = None,
    reason: Annotated[Reason, Query(description="Why (no personal data).")] = (
        "tenant deletion requested"
    ),
) -> Receipt:
    """Delete the whole tenant (admin), in two steps. Without `confirm` (or with a stale
    one) the answer is 428 with a `confirmation_token` and nothing is written; the
    token names the tenant as it stands, so any write in between makes it stale. With
    it, the tenant closes at once (every endpoint but the receipt answers 410) and the
    erasure drain erases every observation and memory through the erasure path, in
    batches. Returns the receipt (`in_progress`, then `completed` at
    `GET /v1/erasures/{id}`). Not undoable."""
    token = confirmation_token(write.runtime.log, caller.tenant_id)
    if confirm != token:
        msg = (
            "deleting the tenant erases everything it holds and cannot be undone; "
            "repeat the request with ?confirm=<confirmation_token>"
            if confirm is None
            else "the confirmation token is stale or wrong (the tenant changed since); "
            "use the new confirmation_token"
        )
        raise ConfirmationRequiredError(msg, token)
    body = TenantDeletion(reason=reason)
    result = write.perform(body, tenant_deletion_spec(body))
    response.status_code = 202
    return erasure_receipt(write.runtime.log, caller.tenant_id, UUID(result["id"]))
