"""``/v1/erasures``: erase content and its lineage, and read the receipts."""

from __future__ import annotations

from uuid import UUID

from pydantic import ConfigDict, Field, model_validator

from palimpsest.api.schemas._common import Reason, RequestBody
from palimpsest.domain.limits import MAX_BATCH_ITEMS
from palimpsest.projections.views.receipts import Receipt, RemovedCounts

__all__ = [
    "ErasureCreate",
    "ErasureReceipt",
    "ErasureRemoved",
]


class ErasureCreate(RequestBody):
    """Erase observations and memories: their content and everything formed only
    from them. At least one id; at most 1,000 in all."""

    # Published, so that a client sees the rule: one of the two lists is not empty.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "properties": {"observation_ids": {"minItems": 1}},
                    "required": ["observation_ids"],
                },
                {"properties": {"memory_ids": {"minItems": 1}}, "required": ["memory_ids"]},
            ]
        }
    )

    observation_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    memory_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    reason: Reason

    @model_validator(mode="after")
    def _names_something(self) -> ErasureCreate:
        if not self.observation_ids and not self.memory_ids:
            msg = "an erasure names at least one observation or memory"
            raise ValueError(msg)
        return self


ErasureRemoved = RemovedCounts
"""How many of each kind of thing an erasure removed."""


class ErasureReceipt(Receipt):
    """What an erasure (or a tenant deletion) removed, by which decision, and whether
    it is complete. ``digests`` are the content digests of the removed bytes
    (observations, versions, excerpts); ``recomputed`` the memories whose beliefs were
    recomputed because they cited or linked erased content."""
