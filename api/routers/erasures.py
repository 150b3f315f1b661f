"""``/v1/erasures``: erase content and its lineage, and read the receipts."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request, Response

from api.deps import (
    AnyCallerDep,
    CallerDep,
    IdempotencyKeyDep,
    RuntimeDep,
    WriterDep,
    perform_write,
)
from api.schemas import ErasureCreate, ErasureReceipt
from domain.errors import PermissionDeniedError
from domain.role import can_administer
from projections.views.receipts import erasure_receipt

__all__ = [
    "erase",
    "read_receipt",
    "router",
]

router = APIRouter(prefix="/v1/erasures", tags=["erasures"])


@router.post("", response_model=ErasureReceipt, status_code=201)
def erase(
    body: ErasureCreate,
    request: Request,
    response: Response,
    caller: CallerDep,
    runtime: RuntimeDep,
    writer: WriterDep,
    key: IdempotencyKeyDep,
) -> dict[str, Any]:
    """Erase observations and memories (admin). In one transaction: the named
    observations' bytes and the named memories' versions are deleted, with every
    version formed only from erased observations and the excerpts cut from them;
    support from erased observations stops counting, and every memory that cited or
    linked them is recomputed (a memory with other support stays, with what is left).
    Reads of erased content answer a placeholder naming this erasure; the log keeps its
    events, which never held content. Not undoable. Returns the receipt; the same
    request again returns it unchanged (200)."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot erase; an admin token is required"
        raise PermissionDeniedError(msg)
    result = perform_write(request, response, writer, caller, key, body)
    if result.get("replayed"):
        response.status_code = 200
    memories = set(body.memory_ids) | {
        UUID(op["memory_id"]) for op in result.get("accepted", []) if "memory_id" in op
    }
    runtime.version_cache.evict(caller.tenant_id, memories)
    return erasure_receipt(runtime.log, caller.tenant_id, UUID(result["id"]))


@router.get("/{erasure_id}", response_model=ErasureReceipt)
def read_receipt(erasure_id: UUID, caller: AnyCallerDep, runtime: RuntimeDep) -> dict[str, Any]:
    """Return an erasure's (or a tenant deletion's) receipt: the decision, counts and
    digests of what was removed, the memories recomputed, and whether it is complete.
    Readable by the tenant's admins even after the tenant is deleted."""
    if not can_administer(caller.role):
        msg = f"role {caller.role!r} cannot read erasure receipts; an admin token is required"
        raise PermissionDeniedError(msg)
    return erasure_receipt(runtime.log, caller.tenant_id, erasure_id)
