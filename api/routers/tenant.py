"""``/v1/tenant``: the caller's tenant as a whole."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from api.deps import CallerDep, ClockDep, IdempotencyKeyDep, RuntimeDep, WriterDep, perform_write
from api.schemas import ErasureReceipt, RetentionPublic, RetentionUpdate, TenantDeletion
from domain.errors import ConfirmationRequiredError, PermissionDeniedError
from domain.limits import MAX_REASON_CHARS
from domain.role import can_administer
from projections.commands.tenant_deletion import confirmation_token
from projections.views.export import export_tenant
from projections.views.receipts import erasure_receipt

__all__ = [
    "delete_tenant",
    "export",
    "read_retention",
    "router",
    "update_retention",
]

router = APIRouter(prefix="/v1/tenant", tags=["tenant"])


@router.get("/export", response_class=StreamingResponse)
def export(caller: CallerDep, runtime: RuntimeDep, clock: ClockDep) -> StreamingResponse:
    """Stream everything the tenant owns as JSON lines (`application/x-ndjson`), read
    in one consistent snapshot: a header, every event oldest first (references and
    digests, as the event feed shows them), every payload that still exists (contents
    by digest), and a trailer with the counts. Admin only."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot export the tenant; an admin token is required"
        raise PermissionDeniedError(msg)
    lines = export_tenant(runtime.log, caller.tenant_id, clock())
    first = next(lines)  # opens the snapshot now: a failure is a clean error, not a cut stream

    def body() -> Iterator[str]:
        yield json.dumps(first) + "\n"
        for line in lines:
            yield json.dumps(line) + "\n"

    return StreamingResponse(
        body(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": 'attachment; filename="palimpsest-export.jsonl"'},
    )


def _hours(value: timedelta) -> int:
    return int(value / timedelta(hours=1))


@router.get("/retention", response_model=RetentionPublic)
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


@router.put("/retention", response_model=RetentionPublic)
def update_retention(
    body: RetentionUpdate,
    request: Request,
    response: Response,
    caller: CallerDep,
    writer: WriterDep,
    key: IdempotencyKeyDep,
) -> dict[str, Any]:
    """Set the tenant's retention of observation bytes (admin, within the deployment's
    maxima). New captures take it at once. A shortening also applies to deadlines not
    yet passed: the retention drain moves each earlier (never before now) and records
    it. A lengthening never extends a deadline already set."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot set retention; an admin token is required"
        raise PermissionDeniedError(msg)
    result = perform_write(request, response, writer, caller, key, body)
    response.status_code = 200
    return {
        **result,
        "max_raw_hours": _hours(writer.policy.raw_retention),
        "max_transient_hours": _hours(writer.policy.transient_retention),
    }


@router.delete("", response_model=ErasureReceipt, status_code=202)
def delete_tenant(
    request: Request,
    response: Response,
    caller: CallerDep,
    runtime: RuntimeDep,
    writer: WriterDep,
    confirm: Annotated[
        str | None,
        Query(max_length=100, description="The confirmation token a first call returned."),
    ] = None,
    reason: Annotated[
        str, Query(min_length=1, max_length=MAX_REASON_CHARS, description="Why (no personal data).")
    ] = "tenant deletion requested",
) -> dict[str, Any]:
    """Delete the whole tenant (admin), in two steps. Without `confirm` (or with a stale
    one) the answer is 428 with a `confirmation_token` and nothing is written; the
    token names the tenant as it stands, so any write in between makes it stale. With
    it, the tenant closes at once (every endpoint but the receipt answers 410) and the
    erasure drain erases every observation and memory through the erasure path, in
    batches. Returns the receipt (`in_progress`, then `completed` at
    `GET /v1/erasures/{id}`). Not undoable."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot delete the tenant; an admin token is required"
        raise PermissionDeniedError(msg)
    token = confirmation_token(runtime.log, caller.tenant_id)
    if confirm != token:
        msg = (
            "deleting the tenant erases everything it holds and cannot be undone; "
            "repeat the request with ?confirm=<confirmation_token>"
            if confirm is None
            else "the confirmation token is stale or wrong (the tenant changed since); "
            "use the new confirmation_token"
        )
        raise ConfirmationRequiredError(msg, token)
    result = perform_write(request, response, writer, caller, None, TenantDeletion(reason=reason))
    response.status_code = 202
    return erasure_receipt(runtime.log, caller.tenant_id, UUID(result["id"]))
