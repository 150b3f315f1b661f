"""``/v1/erasures``: erase content and its lineage, and read the receipts."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Depends, Response

from palimpsest.api._deps import AnyAdminDep, RuntimeDep, WriteDep
from palimpsest.api._specs import erase_spec, requires
from palimpsest.api.schemas import ErasureCreate, ErasureReceipt
from palimpsest.projections.commands.writer import EraseSpec
from palimpsest.projections.views.receipts import Receipt, erasure_receipt

__all__ = [
    "erase",
    "read_receipt",
    "router",
]

router = APIRouter(prefix="/v1/erasures", tags=["erasures"])


@router.post(
    "",
    response_model=ErasureReceipt,
    status_code=201,
    responses={200: {"model": ErasureReceipt, "description": "Replayed: the same receipt."}},
    dependencies=[Depends(requires(EraseSpec))],
)
def erase(body: ErasureCreate, response: Response, write: WriteDep) -> Receipt:
    """Erase observations and memories (admin). In one transaction: the named
    observations' bytes and the named memories' versions are deleted, with every
    version formed only from erased observations and the excerpts cut from them;
    every memory derived from one that lost content (a consolidated memory, by its
    `derived_from` edges) is erased whole, and the text of every reflection and
    merge proposal drawn from one is deleted (the receipt's decision names each);
    support from erased observations stops counting, and every memory that cited or
    linked them is recomputed (a memory with other support stays, with what is left).
    Reads of erased content answer a placeholder naming this erasure; the log keeps its
    events, which never held content. Not undoable. Returns the receipt; the same
    request again returns it unchanged (200)."""
    result = write.perform(body, erase_spec(body))
    if result.get("replayed"):
        response.status_code = 200
    memories = set(body.memory_ids) | {
        UUID(op["memory_id"]) for op in result.get("accepted", []) if "memory_id" in op
    }
    write.runtime.version_cache.evict(write.caller.tenant_id, memories)
    return erasure_receipt(write.runtime.log, write.caller.tenant_id, UUID(result["id"]))


@router.get("/{erasure_id}", response_model=ErasureReceipt)
def read_receipt(erasure_id: UUID, caller: AnyAdminDep, runtime: RuntimeDep) -> Receipt:
    """Return an erasure's (or a tenant deletion's) receipt: the decision, counts and
    digests of what was removed, the memories recomputed, and whether it is complete.
    Readable by the tenant's admins even after the tenant is deleted."""
    return erasure_receipt(runtime.log, caller.tenant_id, erasure_id)
