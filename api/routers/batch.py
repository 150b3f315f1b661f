"""``/v1/batch``: many writes in one transaction."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from api.deps import CallerDep, IdempotencyKeyDep, WriterDep, perform_write
from api.schemas import BatchCreate, BatchPublic

__all__ = [
    "create_batch",
    "router",
]

router = APIRouter(prefix="/v1/batch", tags=["batch"])


@router.post("", status_code=201, response_model=BatchPublic)
def create_batch(
    body: BatchCreate,
    request: Request,
    response: Response,
    caller: CallerDep,
    writer: WriterDep,
    key: IdempotencyKeyDep,
) -> dict[str, Any]:
    """Apply up to 1,000 writes all-or-nothing. Each item has an `op`
    (`create_observation`, `create_memory`, `add_version`, `add_edge`) and that
    endpoint's fields; `"$N"` in an id field names the id produced by item N.
    If any item is refused, nothing is written and the problem names the item."""
    return perform_write(request, response, writer, caller, key, body, batch=True)
