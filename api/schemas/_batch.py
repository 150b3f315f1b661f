"""``/v1/batch``: many writes in one transaction."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import BatchRef, RequestBody
from palimpsest.api.schemas._memories import EdgeCreate, MemoryCreate, VersionCreate
from palimpsest.api.schemas._observations import ObservationCreate
from palimpsest.domain.limits import MAX_BATCH_ITEMS

__all__ = [
    "BatchCreate",
    "BatchItem",
    "BatchPublic",
]


class _ObservationItem(ObservationCreate):
    op: Literal["create_observation"]


class _MemoryItem(MemoryCreate):
    op: Literal["create_memory"]


class _VersionItem(VersionCreate):
    op: Literal["add_version"]
    memory_id: UUID | BatchRef


class _EdgeItem(EdgeCreate):
    op: Literal["add_edge"]
    memory_id: UUID | BatchRef


BatchItem = Annotated[
    _ObservationItem | _MemoryItem | _VersionItem | _EdgeItem, Field(discriminator="op")
]


class BatchCreate(RequestBody):
    """Up to 1,000 writes applied all-or-nothing; ``"$N"`` names item N's id."""

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class BatchPublic(BaseModel):
    """One result per item, in order (each as its single-write endpoint returns it)."""

    results: list[dict[str, object]]
