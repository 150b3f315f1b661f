"""What the log records, as the client reads it: observations, memory versions and
histories, the event feed, decisions, erasure receipts and revision's progress."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from palimpsest.api.client.models import (
    Answer,
    EdgeKind,
    ErasurePlaceholder,
    EvidencePublic,
    MemoryAttributes,
)

__all__ = [
    "ContributionPublic",
    "DecisionPublic",
    "EdgePublic",
    "ErasureReceipt",
    "ErasureRemoved",
    "EventPagePublic",
    "EventPublic",
    "HistoryVersionPublic",
    "MemoryHistoryPublic",
    "MemoryVersionsPublic",
    "Milestone",
    "Milestones",
    "ObservationListItem",
    "ObservationPagePublic",
    "ObservationPublic",
    "RevisionStatusPublic",
    "UnprojectableMemory",
    "VersionPublic",
]


# Observations


class Milestone(Answer):
    """When an observation reached a milestone."""

    at: datetime


class Milestones(Answer):
    """An observation's milestones, each reached at a time or None (not yet): captured,
    formed (cited by a version), indexed and published (every memory citing it)."""

    captured: Milestone
    formed: Milestone | None
    indexed: Milestone | None
    published: Milestone | None


class ObservationListItem(Answer):
    """An observation's recorded metadata (no content), as a listing shows it."""

    id: UUID
    digest: str
    size_bytes: int
    media_type: str
    source: str | None
    captured_at: datetime
    transient: bool
    retention_deadline: datetime
    expired: bool
    erased: ErasurePlaceholder | None = None
    principal_id: UUID
    position: int
    recorded_at: datetime


class ObservationPublic(ObservationListItem):
    """An observation's metadata and milestones (its content is at ``/content``)."""

    milestones: Milestones


class ObservationPagePublic(Answer):
    """A page of observations, newest first, and the cursor of the next (null on the
    last)."""

    items: list[ObservationListItem]
    next_cursor: str | None = None


# Memories' records


class VersionPublic(Answer):
    """One recorded version of a memory, with its content and the excerpts it was
    formed from (served as ``evidence``)."""

    version_id: UUID
    number: int
    content: str | None
    erased: ErasurePlaceholder | None = None
    content_digest: str
    size_bytes: int
    excerpts: list[EvidencePublic] = Field(alias="evidence")
    principal_id: UUID
    position: int
    recorded_at: datetime
    visible_at: datetime


class MemoryVersionsPublic(MemoryAttributes):
    """A memory's recorded attributes and all its versions, oldest first."""

    erased: ErasurePlaceholder | None = None
    versions: list[VersionPublic]


class ContributionPublic(Answer):
    """Support for a version: which observation, by whom, and whether it still counts."""

    contribution_id: UUID
    observation_id: UUID
    proposer_id: UUID
    model_id: str | None
    trust: float
    active: bool
    deactivated_by: UUID | None
    position: int


class HistoryVersionPublic(VersionPublic):
    """A version in a memory's history (its excerpts served as ``formed_from``), with
    the contributions that support it."""

    excerpts: list[EvidencePublic] = Field(alias="formed_from")
    contributions: list[ContributionPublic]


class EdgePublic(Answer):
    """An edge touching the memory, in either direction."""

    edge_id: UUID
    kind: EdgeKind
    source_id: UUID
    target_id: UUID
    decision_id: UUID | None
    position: int


class EventPublic(Answer):
    """One accepted event: its log position, time, type, aggregate and principal, and
    its fields (references, digests and labels; never content)."""

    position: int
    recorded_at: datetime
    visible_at: datetime | None = None
    type: str
    aggregate_id: UUID
    aggregate_version: int
    principal_id: UUID | None
    data: dict[str, Any]


class EventPagePublic(Answer):
    """A page of the tenant's event feed, and the position to continue after."""

    events: list[EventPublic]
    next_after: int


class MemoryHistoryPublic(MemoryAttributes):
    """A memory's whole record, from the log."""

    erased: ErasurePlaceholder | None = None
    versions: list[HistoryVersionPublic]
    edges: list[EdgePublic]
    events: list[EventPublic]


# Decisions and erasures


class DecisionPublic(Answer):
    """A recorded decision, explained: what it was asked, what it saw, what it did."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str | list[str]]
    reason: str | None = None
    logical_key: str
    inputs: list[dict[str, str]]
    seen: list[dict[str, str]]
    accepted: list[dict[str, str]]
    refused: list[dict[str, str]]
    proposer_id: UUID
    principal_id: UUID
    policy_version: str
    position: int
    recorded_at: datetime


class ErasureRemoved(Answer):
    """How many of each kind of thing an erasure removed."""

    observations: int
    memories: int
    versions: int
    excerpts: int
    contributions_deactivated: int


class ErasureReceipt(Answer):
    """What an erasure (or a tenant deletion) removed, by which decision, and whether
    it is complete: the digests of the removed bytes, and the memories recomputed."""

    id: UUID
    kind: Literal["erasure", "tenant_deletion"]
    status: Literal["completed", "in_progress"]
    reason: str | None
    decision: DecisionPublic
    removed: ErasureRemoved
    digests: list[str]
    recomputed: list[UUID]
    batches: int


# Revision's progress


class UnprojectableMemory(Answer):
    """A memory the revision drain quarantined: it cannot be projected at ``revision``."""

    memory_id: UUID
    revision: int
    error: str


class RevisionStatusPublic(Answer):
    """How far revision (and recall's index) has caught up in the caller's tenant."""

    log_head: int
    dirty_memories: int
    unprojectable_memories: int = 0
    unprojectable: list[UnprojectableMemory] = Field(default_factory=list)
    unindexed_memories: int
    oldest_dirty_age_s: float | None
    drain_throughput_per_s: float
