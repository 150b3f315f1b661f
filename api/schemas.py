"""Typed request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from domain.edge import EdgeKind
from domain.limits import MAX_BATCH_ITEMS, MAX_EVIDENCE_ITEMS, MAX_LABEL_CHARS, MAX_REASON_CHARS
from domain.memory import MemoryType

__all__ = [
    "BatchCreate",
    "BatchItem",
    "BatchPublic",
    "BeliefPublic",
    "CacheEvicted",
    "CandidatePublic",
    "CandidatesPublic",
    "ContributionPublic",
    "DecisionOutcome",
    "DecisionPublic",
    "EdgeCreate",
    "EdgeCreated",
    "EdgePublic",
    "ErasureCreate",
    "ErasureReceipt",
    "ErasureRemoved",
    "EventPagePublic",
    "EventPublic",
    "EvidenceIn",
    "EvidencePublic",
    "ForgetCreate",
    "HistoryVersionPublic",
    "LabelChange",
    "MemoryCreate",
    "MemoryCreated",
    "MemoryHistoryPublic",
    "MemoryListItem",
    "MemoryPagePublic",
    "MemoryVersionsPublic",
    "Milestone",
    "ObservationCreate",
    "ObservationCreated",
    "ObservationPublic",
    "Reason",
    "RecallCreate",
    "RecallPublic",
    "RecallRank",
    "RecalledMemory",
    "RetentionPublic",
    "RetentionUpdate",
    "RetractCreate",
    "RevisionPublic",
    "RevisionStatusPublic",
    "TenantDeletion",
    "VersionCreate",
    "VersionCreated",
    "VersionPublic",
    "WithdrawCreate",
]

# No control characters: labels end up in logs, filters and exports.
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_LABEL_CHARS, pattern=r"^[^\x00-\x1f\x7f]+$"),
]
MediaType = Annotated[
    str,
    StringConstraints(
        max_length=MAX_LABEL_CHARS,
        pattern=r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$",
    ),
]
Reason = Annotated[
    str,
    StringConstraints(
        min_length=1, max_length=MAX_REASON_CHARS, pattern=r"^[^\x00-\x09\x0b-\x1f\x7f]*\S"
    ),
]
"""Why an operator decided something: free text, no control characters but newlines."""
BatchRef = Annotated[str, StringConstraints(pattern=r"^\$[0-9]{1,4}$")]
"""``"$N"``: inside a batch, the id produced by item N (counting from 0)."""


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EvidenceIn(_Body):
    """An excerpt ``[start, end)`` of an observation, in Unicode code points."""

    observation_id: UUID | BatchRef
    start: int = Field(ge=0)
    end: int = Field(ge=1)


class ObservationCreate(_Body):
    """A raw report to capture. Content is text, at most 1 MiB as UTF-8."""

    content: str
    media_type: MediaType = "text/plain"
    source: Label | None = None
    captured_at: AwareDatetime | None = None
    transient: bool = False


class ObservationCreated(BaseModel):
    """Where the observation landed in the log, and when its bytes expire."""

    id: UUID
    position: int
    retention_deadline: datetime


class Milestone(BaseModel):
    """When an observation reached a milestone."""

    at: datetime


class ObservationPublic(BaseModel):
    """An observation's metadata (its content is at ``/content``)."""

    id: UUID
    digest: str
    size_bytes: int
    media_type: str
    source: str | None
    captured_at: datetime
    transient: bool
    retention_deadline: datetime
    expired: bool
    erased: dict[str, str] | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    principal_id: UUID
    position: int
    recorded_at: datetime
    milestones: dict[str, Milestone | None] = Field(
        description="captured, formed, indexed, published: each reached at a time, or null."
    )


class _Claim(_Body):
    content: str = Field(description="The claim's text, at most 64 KiB as UTF-8.")
    evidence: list[EvidenceIn] = Field(default_factory=list, max_length=MAX_EVIDENCE_ITEMS)
    model_id: Label | None = Field(default=None, description="The model that proposed it, if any.")
    trust: float = Field(default=1.0, ge=0.0, le=1.0)


class MemoryCreate(_Claim):
    """A new memory and its first version."""

    type: MemoryType
    scope: Label
    project: Label | None = None
    topic: Label | None = None


class CandidatePublic(BaseModel):
    """A current memory the new version might contradict (advisory, never a verdict)."""

    memory_id: UUID
    version_id: UUID
    similarity: float


class CandidatesPublic(BaseModel):
    """Potential contradictions: same type, scope and project, similarity at or above
    the conflict floor, newest first. ``pending`` until the version is embedded (then
    see ``GET /v1/memories/{id}/candidates``)."""

    status: Literal["ready", "pending"]
    floor: float
    items: list[CandidatePublic]
    reason: str | None = None
    url: str | None = Field(default=None, description="Where the candidates appear later.")


class MemoryCreated(BaseModel):
    """The new memory, its first version, and the log position of the write."""

    id: UUID
    version_id: UUID
    position: int
    potential_contradictions: CandidatesPublic | None = None


class VersionCreate(_Claim):
    """A revision of an existing memory."""


class VersionCreated(BaseModel):
    """The new version and the log position of the write."""

    memory_id: UUID
    version_id: UUID
    position: int
    potential_contradictions: CandidatesPublic | None = None


class EdgeCreate(_Body):
    """An edge from the memory in the path to ``target_id``."""

    kind: EdgeKind
    target_id: UUID | BatchRef


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


class EvidencePublic(BaseModel):
    """A cited excerpt, by reference and digest."""

    observation_id: UUID
    start: int
    end: int
    excerpt_digest: str


class VersionPublic(BaseModel):
    """One recorded version of a memory, with its content."""

    version_id: UUID
    number: int
    content: str | None
    erased: dict[str, str] | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    content_digest: str
    size_bytes: int
    evidence: list[EvidencePublic]
    principal_id: UUID
    position: int
    recorded_at: datetime


class MemoryVersionsPublic(BaseModel):
    """A memory's recorded attributes and all its versions, oldest first."""

    id: UUID
    type: MemoryType
    scope: str
    project: str | None
    topic: str | None
    erased: dict[str, str] | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    versions: list[VersionPublic]


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


class BatchCreate(_Body):
    """Up to 1,000 writes applied all-or-nothing; ``"$N"`` names item N's id."""

    items: list[BatchItem] = Field(min_length=1, max_length=MAX_BATCH_ITEMS)


class BatchPublic(BaseModel):
    """One result per item, in order (each as its single-write endpoint returns it)."""

    results: list[dict[str, object]]


class RevisionPublic(BaseModel):
    """The memory's watermark: what revision was requested, and what is published."""

    requested: int
    published: int


class BeliefPublic(BaseModel):
    """The current belief about a memory, ``pending`` (then without a belief), or the
    belief ``as_of`` a past log position."""

    status: Literal["current", "pending", "as_of", "erased"]
    revision: RevisionPublic | None = None
    position: int | None = None
    erasure: dict[str, str] | None = Field(
        default=None, description="For an erased memory: the erasure and its receipt."
    )
    belief: dict[str, object] | None = None
    due: list[dict[str, object]] | None = None
    salience: float | None = Field(
        default=None,
        description="Rank weight of a current belief (confidence, decay since the last "
        "access, accesses, pin); reading it counts as an access.",
    )


class MemoryListItem(BaseModel):
    """One memory in a listing: current with its belief, or pending without one."""

    id: UUID
    type: MemoryType
    scope: str
    project: str | None
    status: Literal["current", "pending", "as_of", "erased"]
    revision: RevisionPublic | None = Field(
        default=None, description="Absent from as-of listings, which are never pending."
    )
    erasure: dict[str, str] | None = Field(
        default=None, description="For an erased memory (listed with include_archived)."
    )
    belief: dict[str, object] | None = None
    salience: float | None = Field(default=None, description="As for a single read.")


class MemoryPagePublic(BaseModel):
    """A page of memories, and the cursor of the next page (absent on the last)."""

    items: list[MemoryListItem]
    next_cursor: str | None = None
    position: int | None = Field(
        default=None, description="The log position an as-of listing used."
    )


class RevisionStatusPublic(BaseModel):
    """How far revision has caught up in the caller's tenant."""

    log_head: int
    dirty_memories: int
    unindexed_memories: int = Field(
        description="Memories recall's index has not caught up with (embedding pending)."
    )
    oldest_dirty_age_s: float | None
    drain_throughput_per_s: float


class RetractCreate(_Body):
    """Retract an observation as evidence."""

    reason: Reason | None = None


class WithdrawCreate(_Body):
    """Withdraw a proposer's contributions (only those made with ``model``, if given)."""

    model: Label | None = None
    reason: Reason | None = None


class ForgetCreate(_Body):
    """Forget (reversibly archive) a memory; the reason is required."""

    reason: Reason


class LabelChange(_Body):
    """Pin, unpin or restore a memory."""

    reason: Reason | None = None


class DecisionOutcome(BaseModel):
    """What a decision did. ``replayed`` is true when the same logical decision had
    already produced the current state: nothing was recorded, and this is its outcome."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str]
    accepted: list[dict[str, str]]
    refused: list[dict[str, str]]
    replayed: bool
    position: int


class DecisionPublic(BaseModel):
    """A recorded decision, explained: what it was asked, what it saw, what it did."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str]
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


class EventPublic(BaseModel):
    """One accepted event: its log position, time, type, aggregate and principal, and
    its fields (references, digests and labels; never content)."""

    position: int
    recorded_at: datetime
    type: str
    aggregate_id: UUID
    aggregate_version: int
    principal_id: UUID | None
    data: dict[str, Any]


class EventPagePublic(BaseModel):
    """A page of the tenant's event feed, and the position to continue after."""

    events: list[EventPublic]
    next_after: int


class ContributionPublic(BaseModel):
    """Support for a version: which observation, by whom, and whether it still counts."""

    contribution_id: UUID
    observation_id: UUID
    proposer_id: UUID
    model_id: str | None
    trust: float
    active: bool
    deactivated_by: UUID | None = Field(description="The decision that deactivated it.")
    position: int


class HistoryVersionPublic(BaseModel):
    """A version in a memory's history."""

    version_id: UUID
    number: int
    content: str | None
    erased: dict[str, str] | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    content_digest: str
    size_bytes: int
    formed_from: list[EvidencePublic]
    principal_id: UUID
    position: int
    recorded_at: datetime
    contributions: list[ContributionPublic]


class EdgePublic(BaseModel):
    """An edge touching the memory, in either direction."""

    edge_id: UUID
    kind: EdgeKind
    source_id: UUID
    target_id: UUID
    decision_id: UUID | None
    position: int


class MemoryHistoryPublic(BaseModel):
    """A memory's whole record, from the log."""

    id: UUID
    type: MemoryType
    scope: str
    project: str | None
    topic: str | None
    erased: dict[str, str] | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    versions: list[HistoryVersionPublic]
    edges: list[EdgePublic]
    events: list[EventPublic]


class CacheEvicted(BaseModel):
    """What an eviction dropped, and what the process's cache holds now (all tenants)."""

    evicted: int
    entries: int
    max_entries: int


class RetentionUpdate(_Body):
    """The tenant's retention of observation bytes, in hours; an omitted value is
    kept. Each must be at most the deployment's maximum."""

    raw_hours: int | None = Field(default=None, ge=1)
    transient_hours: int | None = Field(default=None, ge=1)


class RetentionPublic(BaseModel):
    """The retention new captures get, and the deployment's maxima."""

    raw_hours: int
    transient_hours: int
    max_raw_hours: int
    max_transient_hours: int
    position: int | None = None


class ErasureCreate(_Body):
    """Erase observations and memories: their content and everything formed only
    from them. At least one id; at most 1,000 in all."""

    observation_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    memory_ids: list[UUID] = Field(default_factory=list, max_length=MAX_BATCH_ITEMS)
    reason: Reason


class TenantDeletion(_Body):
    """Why the tenant is deleted (recorded on the decision; keep personal data out)."""

    reason: Reason = "tenant deletion requested"


class ErasureRemoved(BaseModel):
    """How many of each kind of thing an erasure removed."""

    observations: int
    memories: int
    versions: int
    excerpts: int
    contributions_deactivated: int


class ErasureReceipt(BaseModel):
    """What an erasure (or a tenant deletion) removed, by which decision, and whether
    it is complete. ``digests`` are the content digests of the removed bytes
    (observations, versions, excerpts); ``recomputed`` the memories whose beliefs were
    recomputed because they cited or linked erased content."""

    id: UUID
    kind: Literal["erasure", "tenant_deletion"]
    status: Literal["completed", "in_progress"]
    reason: str | None
    decision: dict[str, object]
    removed: ErasureRemoved
    digests: list[str]
    recomputed: list[UUID]
    batches: int = Field(description="Erasure batches of a tenant deletion so far.")


class RecallCreate(_Body):
    """What to recall: a query, how many, and filters applied inside the database."""

    query: str = Field(min_length=1, max_length=4000)
    k: int = Field(default=10, ge=1, le=100)
    type: MemoryType | None = None
    scope: Label | None = None
    project: Label | None = None
    include_archived: bool = False


class RecallRank(BaseModel):
    """Why a memory ranks where it does: the rounded similarity, then salience, then
    recency (the newest write that touched it), then id; ``decided_by`` names the one
    that put it below the memory before it."""

    similarity: float
    salience: float | None
    recency: int
    decided_by: Literal["first", "similarity", "salience", "recency", "id"]


class RecalledMemory(BaseModel):
    """A recalled memory: current (with content and belief) or pending (without)."""

    id: UUID
    type: MemoryType
    scope: str
    project: str | None
    status: Literal["current", "pending"]
    similarity: float
    salience: float | None = None
    version_id: UUID | None = None
    content: str | None = None
    belief: dict[str, object] | None = None
    revision: dict[str, int] | None = None
    rank: RecallRank


class RecallPublic(BaseModel):
    """The recalled memories, best first, and how they were found."""

    items: list[RecalledMemory]
    strategy: Literal["hnsw", "exact"]
    model: str
