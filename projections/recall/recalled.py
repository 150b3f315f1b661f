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
    "TextMatch",
]

DecidedBy = Literal[
    "first",
    "relevance",
    "similarity",
    "fused",
    "salience",
    "recency",
    "id",
    "possibly_superseded",
]
"""What put a memory below the one before it: the part of the rank key that differs
(``similarity`` in ``vector`` mode, ``relevance``, the text score, in ``text`` mode,
``fused`` in ``hybrid`` mode, then ``salience``, ``recency``, ``id``), or
``possibly_superseded``: a newer memory it may conflict with ranks first."""

TextMatch = Literal["all", "some", "none"]
"""Whether a memory holds every word of the query (its lexemes: stop words dropped,
words stemmed), some of them, or none, as the text search found it."""

RecallMode = Literal["hybrid", "vector", "text"]
"""How recall finds memories: by meaning and words fused, by meaning, or by words."""


class RecallRank(Record):
    """Why a memory ranks where it does: first by the mode's score rounded to 3
    decimals (the similarity in ``vector`` mode, the text score in ``text`` mode, the
    fused score in ``hybrid`` mode), then salience, then recency (the newest write that
    touched it), then id, except that a memory possibly superseded by a newer one ranks
    right below it; ``decided_by`` names what put it below the memory before it.
    Salience ranks a pinned memory above every unpinned one, then by the score.

    ``relevance`` is how well it matches on a scale that means the same in every
    recall: the better of its similarity and its text score (a text score of 0.5 or
    more holds every word), never a rank."""

    mode: RecallMode = "vector"
    relevance: float | None = Field(
        default=None,
        description="How well it matches, in [0, 1]: the better of its similarity and its "
        "text score (each where its search ran); comparable across recalls.",
    )
    fused: float | None = Field(
        default=None,
        description="Hybrid mode: the fused rank score it was ordered by, in [0, 1] (1: "
        "first by meaning and by words), plus 0.2 when ``in_named_month``; a rank, not a "
        "match strength. Null otherwise.",
    )
    in_named_month: bool | None = Field(
        default=None,
        description="Hybrid mode: whether its time (the latest capture its support cites, "
        'else its current version\'s writing) falls in a month the query names ("in June", '
        '"May 2023"), which raised its fused score. Null in other modes.',
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
    similarity: float | None = Field(
        description="Cosine similarity to the query, unrounded (null in text mode, or "
        "without an embedding)."
    )
    text_match: TextMatch | None = Field(
        default=None,
        description="all, some or none of the query's words (stemmed, stop words "
        "dropped) are in it; null in vector mode (no text search).",
    )
    possibly_superseded_by: list[UUID] = Field(
        default_factory=list,
        description="Newer memories of the same type, scope and project similar enough "
        "to contradict it (the conflict floor), not settled yet, newest first: it ranks "
        "below them. Settle with POST /v1/memories/{id}/candidates/{other_id}/settle.",
    )
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
