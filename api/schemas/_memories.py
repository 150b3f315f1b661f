"""``/v1/memories``: memories, their versions, edges, labels, history and beliefs."""

from __future__ import annotations

from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import NOT_BLANK, BatchRef, JsonInt, Label, Reason, RequestBody
from palimpsest.domain.edge import EdgeKind
from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.limits import MAX_EVIDENCE_ITEMS
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.views.as_of import BeliefAsOf, ListedBeliefAsOf
from palimpsest.projections.views.candidates import Candidate, Candidates
from palimpsest.projections.views.current_beliefs import (
    CurrentBelief,
    ErasedBelief,
    ListedCurrentBelief,
    ListedErasedBelief,
    ListedPendingBelief,
    ListedUnprojectableBelief,
    PendingBelief,
    Revision,
    UnprojectableBelief,
)
from palimpsest.projections.views.reflections import ReflectionRecord
from palimpsest.projections.views.timeline import (
    ContributionRecord,
    EdgeRecord,
    HistoryVersion,
    MemoryHistory,
)
from palimpsest.projections.views.versions import MemoryVersions, RecordedVersion

__all__ = [
    "BeliefPublic",
    "CandidatePublic",
    "CandidatesPublic",
    "ContributionPublic",
    "EdgeCreate",
    "EdgeCreated",
    "EdgePublic",
    "EvidenceIn",
    "EvidencePublic",
    "ForgetCreate",
    "HistoryVersionPublic",
    "LabelChange",
    "MAX_IDS",
    "MAX_SUPERSEDES",
    "MemoryBatchPublic",
    "MemoryCreate",
    "MemoryCreated",
    "MemoryHistoryPublic",
    "MemoryListItem",
    "MemoryPagePublic",
    "MemoryVersionsPublic",
    "RevisionPublic",
    "SettleCreate",
    "Settled",
    "SupersededPublic",
    "VersionCreate",
    "VersionCreated",
    "VersionPublic",
]


class EvidenceIn(RequestBody):
    """An excerpt ``[start, end)`` of an observation, in Unicode code points."""

    observation_id: UUID | BatchRef
    start: JsonInt = Field(ge=0)
    end: JsonInt = Field(ge=1)


class _Claim(RequestBody):
    content: str = Field(
        min_length=1,
        pattern=NOT_BLANK,
        description="The claim's text, at most 64 KiB as UTF-8, not blank. Stored as bytes: "
        "any character may appear (U+0000 included).",
    )
    evidence: list[EvidenceIn] = Field(default_factory=list, max_length=MAX_EVIDENCE_ITEMS)
    model_id: Label | None = Field(default=None, description="The model that proposed it, if any.")
    trust: float = Field(default=1.0, ge=0.0, le=1.0, strict=True)


MAX_SUPERSEDES = 20
"""Memories one new memory may name as superseded by it."""


class MemoryCreate(_Claim):
    """A new memory and its first version."""

    type: MemoryType
    scope: Label
    project: Label | None = None
    topic: Label | None = None
    importance: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        strict=True,
        description="How much it matters, 0 to 1, for the decay cycle's retention score "
        "(docs/forgetting.md); estimated from type, grade and pins when left out.",
    )
    supersedes: list[UUID] = Field(
        default_factory=list,
        max_length=MAX_SUPERSEDES,
        description="Memories this one replaces: a `supersedes` edge to each (archiving "
        "it structurally), each an `add_edge` decision, recorded in the same write as "
        "the memory. An unknown id refuses the whole write.",
    )


class VersionCreate(_Claim):
    """A revision of an existing memory."""

    restore: bool = Field(
        default=False,
        strict=True,
        description="Restore the memory first, in the same write, when it is archived: "
        "reverse its forget and retract every `supersedes` edge to it (each a recorded "
        "decision). Without it, revising an archived memory is refused: 409 "
        "`memory-forgotten` or `memory-superseded`.",
    )


class EdgeCreate(RequestBody):
    """An edge from the memory in the path to ``target_id``."""

    kind: EdgeKind
    target_id: UUID | BatchRef
    reason: Reason | None = Field(default=None, description="Why; recorded with its decision.")


class SettleCreate(RequestBody):
    """How a potential conflict between the memory in the path and ``other_id`` is
    settled, and why."""

    resolution: Literal["supersedes", "both_stand"] = Field(
        description="`supersedes`: the memory in the path replaces `other_id` (a "
        "`supersedes` edge, archiving it); `both_stand`: neither replaces the other "
        "(a `dismiss_conflict` decision; nothing is archived)."
    )
    reason: Reason = Field(description="Why; recorded with the decision.")


class Settled(BaseModel):
    """A potential conflict settled: the decision that records it."""

    memory_id: UUID
    other_id: UUID
    resolution: Literal["supersedes", "both_stand"]
    decision_id: UUID
    edge_id: UUID | None = Field(description="The `supersedes` edge (null for both_stand).")
    position: int = Field(description="The log position of the decision.")
    replayed: bool = Field(
        description="True when the same settlement was recorded before: nothing new was."
    )


class ForgetCreate(RequestBody):
    """Forget (reversibly archive) a memory; the reason is required."""

    reason: Reason


class LabelChange(RequestBody):
    """Pin, unpin or restore a memory."""

    reason: Reason | None = None


CandidatePublic = Candidate
"""A current memory the new version might contradict (advisory, never a verdict)."""


class CandidatesPublic(Candidates):
    """Potential contradictions: same type, scope and project, similarity at or above
    the conflict floor, newest first. ``pending`` until the version is embedded (then
    see ``GET /v1/memories/{id}/candidates``)."""

    url: str | None = Field(default=None, description="Where the candidates appear later.")


class SupersededPublic(BaseModel):
    """A memory the new one supersedes, and the edge and decision that say so."""

    edge_id: UUID
    target_id: UUID
    decision_id: UUID


class MemoryCreated(BaseModel):
    """The new memory, its first version, and the log position of the write."""

    id: UUID
    version_id: UUID
    position: int
    supersedes: list[SupersededPublic] | None = Field(
        default=None, description="The memories it supersedes, when it names any."
    )
    potential_contradictions: CandidatesPublic | None = None


class VersionCreated(BaseModel):
    """The new version and the log position of the write."""

    memory_id: UUID
    version_id: UUID
    position: int
    potential_contradictions: CandidatesPublic | None = None


class EdgeCreated(BaseModel):
    """The new edge and the log position of the write."""

    id: UUID
    memory_id: UUID
    kind: EdgeKind
    target_id: UUID
    position: int
    decision_id: UUID = Field(description="The operator's decision that added the edge.")
    replayed: bool = Field(
        default=False, description="True when the same edge existed: nothing was recorded."
    )


EvidencePublic = Excerpt
"""A cited excerpt, by reference and digest."""

VersionPublic = RecordedVersion
"""One recorded version of a memory, with its content (its excerpts as ``evidence``)."""


class MemoryVersionsPublic(MemoryVersions):
    """A memory's recorded attributes and all its versions, oldest first."""


RevisionPublic = Revision
"""The memory's watermark: what revision was requested, and what is published."""

BeliefPublic = Annotated[
    CurrentBelief | PendingBelief | UnprojectableBelief | ErasedBelief | BeliefAsOf,
    Field(discriminator="status"),
]
"""The current belief about a memory, ``pending`` (then without a belief),
``unprojectable`` (quarantined, with the error), ``erased``, or the belief ``as_of`` a
past log position."""

MemoryListItem = Annotated[
    ListedCurrentBelief
    | ListedPendingBelief
    | ListedUnprojectableBelief
    | ListedErasedBelief
    | ListedBeliefAsOf,
    Field(discriminator="status"),
]
"""One memory in a listing: current with its belief, pending without one, unprojectable
(quarantined, with the error), erased, or as of a past position."""


MAX_IDS = 100
"""Memories one ``GET /v1/memories?ids=…`` reads."""


class MemoryPagePublic(BaseModel):
    """A page of memories, and the cursor of the next page (null on the last)."""

    items: list[MemoryListItem]
    next_cursor: str | None = None
    position: int | None = Field(
        default=None, description="The log position an as-of listing used (null otherwise)."
    )
    reflections: list[ReflectionRecord] | None = Field(
        default=None,
        description="With include_reflections: the scope's and project's reflections, "
        "newest first, apart from the memories (null otherwise).",
    )


class MemoryBatchPublic(BaseModel):
    """The memories read by id, in the order given, and the ids of none."""

    items: list[MemoryListItem]
    not_found: list[UUID] = Field(description="The ids that name no memory of the tenant.")


ContributionPublic = ContributionRecord
"""Support for a version: which observation, by whom, and whether it still counts."""

HistoryVersionPublic = HistoryVersion
"""A version in a memory's history (its excerpts as ``formed_from``)."""

EdgePublic = EdgeRecord
"""An edge touching the memory, in either direction."""


class MemoryHistoryPublic(MemoryHistory):
    """A memory's whole record, from the log."""
