"""What the service believes about memories, as the client reads it: one memory's
belief, listings, reads by id, and recall.

A belief answer is one of several shapes told apart by ``status`` (``current``,
``pending``, ``unprojectable``, ``erased``, ``as_of``); ``isinstance`` tells them
apart in Python. ``belief`` is the belief document exactly as the server stores
it (labels, applicability, reasons), a plain ``dict``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field

from palimpsest.api.client.models import (
    Answer,
    ErasurePlaceholder,
    MemoryAttributes,
    MemoryKind,
    RevisionPublic,
)

__all__ = [
    "BeliefAsOf",
    "BeliefPublic",
    "CurrentBelief",
    "DueDeadline",
    "ErasedBelief",
    "ListedBeliefAsOf",
    "ListedCurrentBelief",
    "ListedErasedBelief",
    "ListedPendingBelief",
    "ListedUnprojectableBelief",
    "MemoryBatchPublic",
    "MemoryListItem",
    "MemoryPagePublic",
    "PendingBelief",
    "RecallMode",
    "RecallPublic",
    "RecallRank",
    "RecalledCurrent",
    "RecalledMemory",
    "RecalledPending",
    "ReflectionRecord",
    "RequestedRevision",
    "UnprojectableBelief",
]

RecallMode = Literal["hybrid", "vector", "text"]


class DueDeadline(Answer):
    """A cited observation past its retention deadline whose bytes are not gone yet."""

    observation_id: UUID
    deadline: datetime


class CurrentBelief(MemoryKind):
    """The current belief about a memory (its revision has caught up), with the
    current version's text (None when left out or gone) and its salience."""

    status: Literal["current"] = "current"
    revision: RevisionPublic
    belief: dict[str, Any]
    content: str | None = None
    salience: float | None = None


class PendingBelief(Answer):
    """A memory whose revision has not caught up: no belief, the watermark, and the
    retention deadlines due."""

    status: Literal["pending"] = "pending"
    revision: RevisionPublic
    due: list[DueDeadline]


class UnprojectableBelief(Answer):
    """A memory the revision drain cannot project at its requested revision: no
    belief, the watermark (None in as-of reads), and the error."""

    status: Literal["unprojectable"] = "unprojectable"
    revision: RevisionPublic | None = None
    position: int | None = None
    error: str


class ErasedBelief(Answer):
    """An erased memory: the erasure in place of its belief."""

    status: Literal["erased"] = "erased"
    revision: RevisionPublic | None = None
    position: int | None = None
    erasure: ErasurePlaceholder


class BeliefAsOf(Answer):
    """What was believed about a memory at a log position (never pending)."""

    status: Literal["as_of"] = "as_of"
    position: int
    belief: dict[str, Any]


BeliefPublic = Annotated[
    CurrentBelief | PendingBelief | UnprojectableBelief | ErasedBelief | BeliefAsOf,
    Field(discriminator="status"),
]
"""What ``read_memory`` answers."""


class ListedCurrentBelief(CurrentBelief, MemoryAttributes):
    """A current memory in a listing, with its belief."""


class ListedPendingBelief(MemoryAttributes):
    """A pending memory in a listing: its watermark, never stale content."""

    status: Literal["pending"] = "pending"
    revision: RevisionPublic


class ListedUnprojectableBelief(UnprojectableBelief, MemoryAttributes):
    """A quarantined memory in a listing: its watermark and error, never content."""


class ListedErasedBelief(ErasedBelief, MemoryAttributes):
    """An erased memory in a listing (listed only with ``include_archived``)."""


class ListedBeliefAsOf(MemoryAttributes):
    """A memory in an as-of listing, with what was believed then."""

    status: Literal["as_of"] = "as_of"
    belief: dict[str, Any]


MemoryListItem = Annotated[
    ListedCurrentBelief
    | ListedPendingBelief
    | ListedUnprojectableBelief
    | ListedErasedBelief
    | ListedBeliefAsOf,
    Field(discriminator="status"),
]
"""One memory of a listing or of a read by ids."""


class ReflectionRecord(Answer):
    """An insight a model drew from several memories: not a memory, never ranked."""

    id: UUID
    scope: str
    project: str | None
    content: str
    model: str
    source_ids: list[UUID]
    created_at: datetime


class MemoryPagePublic(Answer):
    """A page of memories, newest first, and the cursor of the next (null on the last)."""

    items: list[MemoryListItem]
    next_cursor: str | None = None
    position: int | None = None
    """The log position an as-of listing used (None otherwise)."""
    reflections: list[ReflectionRecord] | None = None


class MemoryBatchPublic(Answer):
    """The memories read by id, in the order given, and the ids of none."""

    items: list[MemoryListItem]
    not_found: list[UUID]


# Recall


class RecallRank(Answer):
    """Why a recalled memory ranks where it does, and what put it below the one before."""

    mode: RecallMode = "vector"
    relevance: float | None = None
    fused: float | None = None
    in_named_month: bool | None = None
    similarity: float | None
    vector_rank: int | None = None
    text_rank: int | None = None
    text_score: float | None = None
    salience: float | None
    pinned: bool
    recency: int
    decided_by: Literal[
        "first",
        "relevance",
        "similarity",
        "fused",
        "salience",
        "recency",
        "id",
        "possibly_superseded",
    ]


class RequestedRevision(Answer):
    """The revision a pending memory waits for."""

    requested: int


class _Recalled(MemoryAttributes):
    similarity: float | None
    text_match: Literal["all", "some", "none"] | None = None
    """Whether all, some or none of the query's words are in it (None in vector mode)."""
    possibly_superseded_by: list[UUID] = Field(default_factory=list)
    """Newer similar memories, not settled yet, that it ranks below, newest first."""
    rank: RecallRank


class RecalledCurrent(_Recalled):
    """A recalled memory that is current: its content and belief."""

    status: Literal["current"] = "current"
    salience: float | None = None
    version_id: UUID
    content: str | None = None
    belief: dict[str, Any]
    faded: bool = False


class RecalledPending(_Recalled):
    """A recalled memory whose revision or index has not caught up: no content."""

    status: Literal["pending"] = "pending"
    revision: RequestedRevision


RecalledMemory = Annotated[RecalledCurrent | RecalledPending, Field(discriminator="status")]
"""A recalled memory: current (with content and belief) or pending (without)."""


class RecallPublic(Answer):
    """The recalled memories, best first, how they were found, and the next page's cursor."""

    items: list[RecalledMemory]
    strategy: Literal["hnsw", "exact", "text"]
    model: str
    mode: RecallMode = "hybrid"
    next_cursor: str | None = None
    reflections: list[ReflectionRecord] | None = None
    caught_up: bool | None = None
    """Whether every write up to the recall's ``after`` was indexed when it ran (None
    without ``after``)."""
