"""``/v1/batch``: many writes in one transaction."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from palimpsest.api._deps import WriteDep
from palimpsest.api._specs import batch_specs, requires
from palimpsest.api.schemas import BatchCreate, BatchPublic
from palimpsest.projections.commands.writer import (
    EdgeSpec,
    MemorySpec,
    ObservationSpec,
    VersionSpec,
)

__all__ = [
    "create_batch",
    "router",
]

router = APIRouter(prefix="/v1/batch", tags=["batch"])


@router.post(
    "",
    status_code=201,
    response_model=BatchPublic,
    responses={200: {"model": BatchPublic, "description": "Replayed: nothing recorded."}},
    # Every op a batch takes needs the same role: refuse a caller before reading items.
    dependencies=[Depends(requires(ObservationSpec, MemorySpec, VersionSpec, EdgeSpec))],
)
def create_batch(body: BatchCreate, write: WriteDep) -> dict[str, Any]:
    """Apply up to 1,000 writes all-or-nothing. Each item has an `op`
    (`create_observation`, `create_memory`, `add_version`, `add_edge`) and that
    endpoint's fields; `"$N"` in an id field names the id produced by item N.
    If any item is refused, nothing is written and the problem names the item."""
    return write.perform_batch(body, batch_specs(body))
