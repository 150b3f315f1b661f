"""``/v1/recall``: find memories by meaning."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.common import JsonInt, Label, PgText, RequestBody
from domain.memory import MemoryType
from projections.recall.recalled import RecallItem, RecallRank

__all__ = [
    "RecallCreate",
    "RecallPublic",
    "RecallRank",
    "RecalledMemory",
]


class RecallCreate(RequestBody):
    """What to recall: a query, how many, and filters (type, scope, project, topic)
    applied inside the database."""

    query: PgText = Field(min_length=1, max_length=4000)
    k: JsonInt = Field(default=10, ge=1, le=100)
    type: MemoryType | None = None
    scope: Label | None = None
    project: Label | None = None
    topic: Label | None = None
    include_archived: bool = Field(default=False, strict=True)


RecalledMemory = RecallItem
"""A recalled memory: current (with content and belief) or pending (without)."""


class RecallPublic(BaseModel):
    """The recalled memories, best first, and how they were found."""

    items: list[RecalledMemory]
    strategy: Literal["hnsw", "exact"]
    model: str
