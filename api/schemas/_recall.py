"""``/v1/recall``: find memories by meaning."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import MAX_POSITION, JsonInt, Label, PgText, RequestBody
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.recall.recalled import RecallItem, RecallMode, RecallRank
from palimpsest.projections.views.reflections import ReflectionRecord

__all__ = [
    "RecallCreate",
    "RecallPublic",
    "RecallRank",
    "RecalledMemory",
]


class RecallCreate(RequestBody):
    """What to recall: a query, how many, how (``mode``: meaning and words fused,
    meaning only, or words only), filters (type, scope, project, a project and those
    below it, topic, least similarity) applied inside the database, and the ``cursor``
    of a next page."""

    query: PgText = Field(min_length=1, max_length=4000)
    k: JsonInt = Field(default=10, ge=1, le=100)
    type: MemoryType | None = None
    scope: Label | None = None
    project: Label | None = None
    topic: Label | None = None
    project_under: Label | None = Field(
        default=None,
        description="Only this project and the projects below it, `/` separating "
        "levels: `a` selects `a` and `a/b`, not `ab` (a LangGraph namespace prefix). "
        "Applied inside the search, like every filter.",
    )
    include_archived: bool = Field(default=False, strict=True)
    include_reflections: bool = Field(
        default=False,
        strict=True,
        description="Also answer the reflections drawn from the memories returned, apart "
        "in `reflections` (never ranked among the memories).",
    )
    mode: RecallMode = Field(
        default="hybrid",
        description="hybrid: meaning and words, fused; vector: meaning; text: words "
        "(the query is not embedded).",
    )
    min_similarity: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        strict=True,
        description="Leave out memories whose cosine similarity to the query is lower "
        "(in text mode too, which then embeds the query); 0 leaves nothing out. "
        "Without it, memories that match neither by meaning nor by words are left out "
        "(docs/recall.md), so a query about nothing stored answers no items.",
    )
    after: JsonInt | None = Field(
        default=None,
        ge=0,
        le=MAX_POSITION,
        description="The `position` of the caller's last acknowledged write: the recall "
        "first waits (at most 5 s) until every write up to it is indexed, so it sees "
        "them (`caught_up` says whether it did).",
    )
    cursor: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="The next_cursor of the previous page of the same recall.",
    )


RecalledMemory = RecallItem
"""A recalled memory: current (with content and belief) or pending (without)."""


class RecallPublic(BaseModel):
    """The recalled memories, best first, and how they were found."""

    items: list[RecalledMemory]
    strategy: Literal["hnsw", "exact", "text"]
    model: str
    mode: RecallMode = "hybrid"
    next_cursor: str | None = Field(
        default=None, description="Pass back as cursor for the next page; null on the last."
    )
    reflections: list[ReflectionRecord] | None = Field(
        default=None,
        description="With include_reflections: reflections drawn from the memories "
        "returned, newest first (null otherwise).",
    )
    caught_up: bool | None = Field(
        default=None,
        description="With after: whether every write up to it was indexed when the "
        "search ran (false: the wait's bound ran out first). Null without after.",
    )
