"""``/v1/erasures``: erase content and its lineage, and read the receipts."""

from __future__ import annotations

from uuid import UUID

from pydantic import Field

from api.schemas.common import Reason, RequestBody
from domain.limits import MAX_BATCH_ITEMS
from projections.views.receipts import Receipt, RemovedCounts

__all__ = [
    "ErasureCreate",
    "ErasureReceipt",
    "ErasureRemoved",
]


class ErasureCreate(RequestBody):
    """Erase observations and memories: their content and everything formed only
    from them. At least one id; at most 1,000 in all."""

    observation_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    memory_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    reason: Reason


ErasureRemoved = RemovedCounts
"""How many of each kind of thing an erasure removed."""


class ErasureReceipt(Receipt):
    """What an erasure (or a tenant deletion) removed, by which decision, and whether
    it is complete. ``digests`` are the content digests of the removed bytes
    (observations, versions, excerpts); ``recomputed`` the memories whose beliefs were
    recomputed because they cited or linked erased content."""
