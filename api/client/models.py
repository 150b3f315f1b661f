"""The answers of writes, of the tenant's settings and of the forgetting pass, as the
client reads them; and what every answer model shares.

The client declares its own models (pydantic only), so that it installs and
imports without any part of the server. They are held to the server's OpenAPI
document by ``tests/api/client/test_models_match_openapi.py``: each has every
field its response schema has, by the name served (a memory's ``memory_type``
is served as ``type``), with a type that accepts every value the server sends.
A field the server adds later is ignored, so an older client still reads a
newer server's answers.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Answer",
    "BatchPublic",
    "CacheEvicted",
    "CandidatePublic",
    "CandidatesPublic",
    "ContributionAdded",
    "ContributionsCreated",
    "CyclePublic",
    "DecisionOutcome",
    "EdgeCreated",
    "EdgeKind",
    "ErasurePlaceholder",
    "EvidenceExcerptPublic",
    "EvidencePublic",
    "ForgettingPolicyPublic",
    "JudgeItemsPublic",
    "JudgmentPublic",
    "MemoryAttributes",
    "MemoryCreated",
    "MemoryKind",
    "MemoryType",
    "ObservationCreated",
    "PassRunPublic",
    "ProposalPagePublic",
    "ProposalPublic",
    "ProposedMemoryPublic",
    "Resolution",
    "RetentionPublic",
    "RevisionPublic",
    "Settled",
    "SupersededPublic",
    "VerdictRecorded",
    "VerdictsRecorded",
    "VersionCreated",
]

MemoryType = Literal["fact", "preference", "decision", "blocker", "event", "note"]
EdgeKind = Literal["supersedes", "conflicts_with", "extends", "derived_from"]
Resolution = Literal["supersedes", "both_stand"]
"""How a potential contradiction is settled: one memory replaces the other, or both
stand."""


class Answer(BaseModel):
    """The base of the client's answer models: immutable, read by the names served.

    Unknown fields are ignored rather than refused: a server newer than the client
    may add fields, and the client still reads what it knows."""

    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)


class MemoryKind(Answer):
    """A memory's immutable attributes: its type, scope, project and topic."""

    memory_type: MemoryType = Field(alias="type")
    scope: str
    project: str | None
    topic: str | None


class MemoryAttributes(MemoryKind):
    """A memory's id and immutable attributes, as every listing of memories shows them."""

    id: UUID


class ErasurePlaceholder(Answer):
    """What a read shows in place of erased content: the erasure that took it."""

    id: UUID
    receipt: str
    """Where the erasure's receipt is: ``/v1/erasures/{id}``."""


class RevisionPublic(Answer):
    """A memory's watermark: what revision was requested, and what is published."""

    requested: int
    published: int


class EvidencePublic(Answer):
    """A cited excerpt ``[start, end)`` of an observation, by reference and digest."""

    observation_id: UUID
    start: int
    end: int
    excerpt_digest: str


# Writes


class ObservationCreated(Answer):
    """Where the observation landed in the log, and when its bytes expire."""

    id: UUID
    position: int
    retention_deadline: datetime


class CandidatePublic(Answer):
    """A current memory the new version might contradict (advisory, never a verdict)."""

    memory_id: UUID
    version_id: UUID
    similarity: float


class CandidatesPublic(Answer):
    """Potential contradictions of a version, newest first; ``pending`` (with ``url``)
    until the version is embedded."""

    status: Literal["ready", "pending"]
    floor: float
    items: list[CandidatePublic]
    reason: str | None = None
    url: str | None = None


class SupersededPublic(Answer):
    """A memory a new one supersedes, and the edge and decision that say so."""

    edge_id: UUID
    target_id: UUID
    decision_id: UUID


class MemoryCreated(Answer):
    """The new memory, its first version, the log position of the write, and the
    memories it supersedes (None when it names none)."""

    id: UUID
    version_id: UUID
    position: int
    supersedes: list[SupersededPublic] | None = None
    potential_contradictions: CandidatesPublic | None = None


class VersionCreated(Answer):
    """The new version and the log position of the write."""

    memory_id: UUID
    version_id: UUID
    position: int
    potential_contradictions: CandidatesPublic | None = None


class Settled(Answer):
    """A potential contradiction settled as the caller judged it: the decision that
    records it, the ``supersedes`` edge (None for ``both_stand``) and the write's
    position (``replayed``: the same settlement was recorded before, nothing new was)."""

    memory_id: UUID
    other_id: UUID
    resolution: Resolution
    decision_id: UUID
    edge_id: UUID | None
    position: int
    replayed: bool


class EdgeCreated(Answer):
    """The new edge, the operator's decision that added it, and the write's position
    (``replayed``: the same edge existed, nothing was recorded)."""

    id: UUID
    memory_id: UUID
    kind: EdgeKind
    target_id: UUID
    position: int
    decision_id: UUID
    replayed: bool = False


class ContributionAdded(Answer):
    """One new contribution: the excerpt it cites, by reference and digest."""

    id: UUID
    observation_id: UUID
    start: int
    end: int
    excerpt_digest: str


class ContributionsCreated(Answer):
    """The contributions added, the version they support, and the write's log position."""

    memory_id: UUID
    version_id: UUID
    contributions: list[ContributionAdded]
    position: int


class DecisionOutcome(Answer):
    """What a decision did (``replayed``: the same decision had already produced the
    current state, nothing was recorded)."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str | list[str]]
    reason: str | None = None
    accepted: list[dict[str, str]]
    refused: list[dict[str, str]]
    replayed: bool
    position: int


class BatchPublic(Answer):
    """One result per item of a batch, in order (each as its single write answers it)."""

    results: list[dict[str, Any]]


# The tenant


class RetentionPublic(Answer):
    """The retention new captures get, in hours, and the deployment's maxima."""

    raw_hours: int
    transient_hours: int
    max_raw_hours: int
    max_transient_hours: int
    position: int | None = None
    """The log position of the write that set it (a ``PUT``'s answer only)."""


class JudgmentPublic(Answer):
    """The tenant's judgment policy, and what today's passes used of its budget."""

    tenant_id: UUID
    tenant_name: str
    enabled: bool
    daily_calls: int
    daily_tokens: int
    used_calls: int
    used_tokens: int


class ForgettingPolicyPublic(Answer):
    """The tenant's forgetting policy (the defaults, version 0, until one is set)."""

    enabled: bool
    schedule_minutes: int
    weights: dict[str, float]
    half_life_days: dict[str, float]
    importance_floor: float
    fade_below: float
    prune_below: float
    duplicate_floor: float
    auto_archive_decayed: bool
    activity_window_days: float
    merge_similarity_floor: float
    auto_apply_extractive_merges: bool
    reflections_enabled: bool
    version: int


class CyclePublic(Answer):
    """One decay cycle's report: counts per bucket, what it faded, proposed and archived."""

    cycle_id: UUID
    dry_run: bool
    snapshot_at: datetime
    policy_version: int
    counts: dict[str, int]
    by_type: dict[str, dict[str, int]]
    duplicates: list[dict[str, Any]]
    faded: list[str]
    unfaded: list[str]
    proposals: list[str]
    archived: list[str]
    held_back: int | None = None
    importance_fallbacks: int | None = None
    """Scores whose importance is the heuristic's, the model scorer failing (absent from
    cycles recorded before it was)."""
    scores: list[dict[str, Any]] | None = None
    consolidation: dict[str, Any] | None = None
    memories: dict[str, dict[str, Any]]
    """Every memory the report names, by id: type, scope, project, topic, text, archived."""
    proposed: list[dict[str, Any]]
    factors_explained: dict[str, str]
    buckets_explained: dict[str, str]


class CacheEvicted(Answer):
    """What an eviction dropped, and what the process's version cache holds now."""

    evicted: int
    entries: int
    max_entries: int
    aggregates_evicted: int = 0
    query_vectors_evicted: int = 0


# The forgetting pass


class VerdictRecorded(Answer):
    """One recorded verdict: ``proposed`` (listed for review) or ``dismissed``."""

    id: UUID
    status: Literal["proposed", "dismissed"]


class VerdictsRecorded(Answer):
    """The recorded verdicts, in the order given, and the run they belong to."""

    run_id: UUID
    results: list[VerdictRecorded]


class PassRunPublic(Answer):
    """What one forgetting pass over the tenant did."""

    run_id: UUID
    dry_run: bool
    singles: int
    pairs: int
    items: int
    batches: int
    judged: int
    proposed: int
    dismissed: int
    failed: int
    already_open: int
    queued: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    stopped: Literal["not-opted-in", "opted-out", "budget", "judge-unavailable"] | None
    failures: list[str]


class JudgeItemsPublic(Answer):
    """What the forgetting pass would have judged now, for a person: each side with its
    memory id, scope, project, content, times and evidence; ``items_digest`` names the
    listing for verdicts by ref."""

    now: datetime
    items_digest: str
    items: list[dict[str, Any]]


class EvidenceExcerptPublic(Answer):
    """One excerpt a memory's current version cites, with its source."""

    observation_id: UUID
    source: str | None
    captured_at: datetime
    text: str | None


class ProposedMemoryPublic(MemoryAttributes):
    """One memory of a proposal, as it is now, and whether it changed since the verdict."""

    version_id: UUID | None
    content: str | None
    seen_version_id: UUID | None
    archived: bool
    erased: bool
    changed: bool
    recorded_at: datetime
    last_touched_at: datetime
    evidence: list[EvidenceExcerptPublic]


class ProposalPublic(Answer):
    """A proposal: the verdict, both memories side by side, and what became of it."""

    id: UUID
    status: str
    action: str
    probability: float | None
    distribution: dict[str, float] | None
    model: str
    run_id: UUID
    note: str | None
    policy_version: str
    memory: ProposedMemoryPublic
    related: ProposedMemoryPublic | None
    changed: bool
    sources: list[ProposedMemoryPublic] = Field(default_factory=list)
    merged_content: str | None = None
    created_at: datetime
    position: int
    decision_id: UUID | None
    decided_at: datetime | None


class ProposalPagePublic(Answer):
    """A page of proposals, newest first, and the cursor of the next (null on the last)."""

    items: list[ProposalPublic]
    next_cursor: str | None
