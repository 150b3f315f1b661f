"""``/v1/tenant``: the caller's tenant as a whole."""

from __future__ import annotations

import json
from collections.abc import Iterator

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from api.deps import CallerDep, ClockDep, RuntimeDep
from domain.errors import PermissionDeniedError
from domain.role import can_administer
from projections.export import export_tenant

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
