"""What recall answers: each memory found, current or pending, and why it ranks there."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import Field

from palimpsest.projections.views.belief_facts import BeliefJson
from palimpsest.projections.views.listing import MemoryAttributes
from palimpsest.projections.views.record import Record

__all__ = [
    "DecidedBy",
    "RecallItem",
    "RecallMode",
    "RecallRank",
    "RecalledCurrent",
    "RecalledPending",
    "RequestedRevision",
]

DecidedBy = Literal["first", "relevance", "similarity", "salience", "recency", "id"]
"""The part of the rank key that put a memory below the one before it (``similarity``
is the relevance of ``vector`` recall)."""

RecallMode = Literal["hybrid", "vector", "text"]
"""How recall finds memories: by meaning and words fused, by meaning, or by words."""


class RecallRank(Record):
    """Why a memory ranks where it does: its relevance rounded to 3 decimals (the
    similarity in ``vector`` mode, the text score in ``text`` mode, the fused score
    in ``hybrid`` mode), then salience, then recency (the newest write that touched
    it), then id; ``decided_by`` names the one that put it below the memory before it.
    Salience ranks a pinned memory above every unpinned one, then by the score."""

    mode: RecallMode = "vector"
    relevance: float | None = Field(
        default=None, description="What ranked first: similarity, text score or fused score."
    )
    similarity: float | None = Field(
        description="Cosine similarity to the query; null in text mode or without embedding."
    )
    vector_rank: int | None = Field(
        default=None, description="1-based place among the candidates by meaning; null if not one."
    )
    text_rank: int | None = Field(
        default=None, description="1-based place among the candidates by words; null if not one."
    )
    text_score: float | None = Field(
        default=None, description="Cover-density text rank in [0, 1); null if no word matched."
    )
    salience: float | None = Field(
        description="The salience score in [0, 1] (see docs/forgetting.md); null while pending."
    )
    pinned: bool = Field(description="Pinned: ranks above unpinned memories on salience.")
    recency: int
    decided_by: DecidedBy


class RequestedRevision(Record):
    """The revision a pending memory waits for."""

    requested: int


class _Recalled(MemoryAttributes):
    similarity: float | None
    rank: RecallRank


class RecalledCurrent(_Recalled):
    """A recalled memory that is current: its content and belief."""

    status: Literal["current"] = "current"
    salience: float | None = Field(
        default=None, description="The salience score in [0, 1] (see docs/forgetting.md)."
    )
    version_id: UUID
    content: str | None = None
    belief: BeliefJson
    faded: bool = Field(
        default=False,
        description="The decay cycle faded it (demoted: ranked below unfaded memories of "
        "equal similarity) and it was not read or pinned since (docs/forgetting.md).",
    )


class RecalledPending(_Recalled):
    """A recalled memory whose revision or index has not caught up: no content."""

    status: Literal["pending"] = "pending"
    revision: RequestedRevision


RecallItem = Annotated[RecalledCurrent | RecalledPending, Field(discriminator="status")]
"""A recalled memory: current (with content and belief) or pending (without)."""
