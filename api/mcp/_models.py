"""What the MCP tools answer: explicit models, published as each tool's ``outputSchema``.

Every field is typed (no open objects): strict tool schemas refuse
``additionalProperties`` without a type, and an agent reads a typed field more
reliably than a nested document. A belief is summarised (grade, confidence,
labels) rather than served as the HTTP API's whole belief document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from palimpsest.domain.belief import Grade
from palimpsest.domain.memory import MemoryType

__all__ = [
    "BeliefStatus",
    "BeliefSummary",
    "ConflictsStatus",
    "DecisionResult",
    "ErasureResult",
    "HistoryEvent",
    "HistoryResult",
    "HistoryVersion",
    "ListResult",
    "ListedItem",
    "PotentialConflict",
    "ProposalItem",
    "ProposalList",
    "RankReason",
    "RecallResult",
    "RecalledItem",
    "RememberResult",
    "RetentionResult",
    "ReviseResult",
    "SettleResult",
    "summarise",
]

_POSITION = (
    "The write's place in palimpsest's history (a number that only grows); history "
    "takes it as at_position to show what was believed right after it."
)

BeliefStatus = Literal["current", "pending", "erased", "unprojectable", "as_of"]
"""``current``: revision caught up with every accepted write; ``pending``: a write was
accepted (it is durable) but not yet projected; ``erased``; ``unprojectable`` (the
drain quarantined it); ``as_of``: what was believed at a past position."""


def _untitled(schema: dict[str, Any]) -> None:
    """Leave out the titles pydantic gives every field: a tool list is read by a model,
    on every turn, and a title only repeats the field's name."""
    schema.pop("title", None)
    for field in schema.get("properties", {}).values():
        field.pop("title", None)


class _Answer(BaseModel):
    model_config = ConfigDict(json_schema_extra=_untitled)


class BeliefSummary(_Answer):
    """What palimpsest believes about a memory, in brief."""

    grade: Grade = Field(description="corroborated, supported, unsupported or contested.")
    confidence: float = Field(description="In [0, 1].")
    version_id: UUID | None = Field(description="The version believed (null: none).")
    archived: bool = Field(description="Forgotten, or superseded by another memory.")
    archived_reason: str | None = Field(description="Why it is archived (null when it is not).")
    pinned: bool
    superseded_by: list[UUID]


def summarise(belief: Any) -> BeliefSummary:
    """Return the summary of a belief document (as the read model stores it)."""
    labels = belief.get("labels") or {}
    archived = labels.get("archived")
    version = belief.get("current_version_id")
    return BeliefSummary(
        grade=belief["grade"],
        confidence=float(belief.get("confidence", 1.0)),
        version_id=None if version is None else UUID(str(version)),
        archived=archived is not None,
        archived_reason=None if archived is None else str(archived.get("reason")),
        pinned=bool(labels.get("pinned", False)),
        superseded_by=[UUID(str(i)) for i in labels.get("superseded_by") or []],
    )


class PotentialConflict(_Answer):
    """An existing memory the new one may contradict or replace: same type, scope and
    project, and similar in meaning. Only you (or the user) can tell; settle it."""

    memory_id: UUID
    content: str = Field(description="Its current text.")
    type: MemoryType
    scope: str
    project: str | None
    recorded_at: datetime = Field(description="When its current text was recorded.")
    similarity: float = Field(description="Cosine similarity to the new memory, 0 to 1.")


ConflictsStatus = Literal["ready", "pending", "never"]
"""``ready``: checked; ``pending``: the new memory was not indexed in time to check;
``never``: memories of its type are never checked (event, note, blocker)."""


class RememberResult(_Answer):
    """A memory stored: durable once this answers."""

    memory_id: UUID
    version_id: UUID
    position: int = Field(description=_POSITION)
    observation_id: UUID | None = Field(
        default=None, description="The source text, kept as an observation (if given)."
    )
    observation_position: int | None = Field(
        default=None, description="The observation's place in history."
    )
    status: BeliefStatus = Field(
        description="current, or pending: stored, and not yet readable in recall."
    )
    replayed: bool = Field(
        default=False,
        description="True when this request_id was stored before: nothing new was written.",
    )
    superseded: list[UUID] = Field(
        default_factory=list, description="The memories it supersedes (from supersedes)."
    )
    conflicts_status: ConflictsStatus = Field(
        description="ready: checked for conflicts; pending: not indexed in time to check; "
        "never: this type is not checked."
    )
    potential_conflicts: list[PotentialConflict] = Field(
        default_factory=list, description="Most similar first. Settle each one."
    )
    next_step: str | None = Field(
        default=None, description="What to do with the potential conflicts, if anything."
    )


class ReviseResult(_Answer):
    """A new version recorded: durable once this answers."""

    memory_id: UUID
    version_id: UUID
    position: int = Field(description=_POSITION)
    observation_id: UUID | None = None
    observation_position: int | None = None
    status: BeliefStatus = Field(
        description="current, or pending: stored, and not yet readable in recall."
    )
    replayed: bool = Field(
        default=False,
        description="True when this request_id was stored before: nothing new was written.",
    )


class SettleResult(_Answer):
    """A potential conflict settled, by a recorded decision."""

    memory_id: UUID
    other_id: UUID
    resolution: Literal["supersedes", "both_stand"]
    decision_id: UUID
    edge_id: UUID | None = Field(description="The supersedes edge (null for both_stand).")
    position: int = Field(description=_POSITION)
    replayed: bool = Field(
        description="True when the same settlement was recorded before: nothing new was."
    )


class DecisionResult(_Answer):
    """A recorded decision (forget, restore, pin, unpin, apply or reject a proposal)."""

    decision_id: UUID
    kind: str
    memory_id: UUID | None = Field(description="The memory it is about (null for others).")
    position: int = Field(description=_POSITION)
    replayed: bool = Field(
        description="True when the same decision had already produced the current "
        "state: nothing new was recorded."
    )
    status: BeliefStatus | None = Field(
        default=None, description="The memory's belief status right after (null for others)."
    )


class RankReason(_Answer):
    """Why a recalled memory ranks where it does: its mode's score, then salience (a
    pin first), then recency, then id; a memory possibly superseded by a newer one
    found with it ranks right below that one."""

    mode: Literal["hybrid", "vector", "text"] = Field(description="How it was found.")
    relevance: float | None = Field(
        description="How well it matches, 0 to 1: the better of its similarity and its "
        "text score; comparable across recalls."
    )
    fused: float | None = Field(
        default=None,
        description="Hybrid mode: the fused rank score it was ordered by (a rank, not a "
        "strength); null otherwise.",
    )
    in_named_month: bool | None = Field(
        default=None,
        description='Hybrid mode: its time falls in a month the query names ("in June"), '
        "which raised its fused score; null otherwise.",
    )
    similarity: float | None = Field(
        description="Cosine similarity to the query, rounded (null when only its words matched)."
    )
    vector_rank: int | None = Field(description="Its place by meaning (null: not a candidate).")
    text_rank: int | None = Field(description="Its place by words (null: no word matched).")
    salience: float | None = Field(description="The salience score in [0, 1]; null if pending.")
    pinned: bool
    recency: int = Field(description="The place in history of the newest write touching it.")
    decided_by: str = Field(
        description="What put it below the one before: first, relevance, similarity, fused, "
        "salience, recency, id, or possibly_superseded (a newer memory it may conflict with "
        "ranks first)."
    )


class RecalledItem(_Answer):
    """One recalled memory."""

    id: UUID
    status: Literal["current", "pending"]
    type: MemoryType
    scope: str
    project: str | None
    topic: str | None
    content: str | None = Field(description="The current version's text (null while pending).")
    belief: BeliefSummary | None = Field(description="Null while pending.")
    similarity: float | None = Field(
        default=None,
        description="Cosine similarity to the query, unrounded (null in text mode).",
    )
    text_match: Literal["all", "some", "none"] | None = Field(
        default=None,
        description="Whether it holds all, some or none of the query's words (null in "
        "vector mode).",
    )
    possibly_superseded_by: list[UUID] = Field(
        default_factory=list,
        description="Newer memories that may replace it, not settled yet: read both, and "
        "settle (memory_id: the newer, other_id: this one).",
    )
    why: RankReason


class RecallResult(_Answer):
    """The memories recalled, best first."""

    items: list[RecalledItem]
    model: str = Field(description="The embedding model that compared meanings.")
    caught_up: bool | None = Field(
        description="Whether every write you made before this recall was searchable "
        "when it ran (false: not yet, recall again in a moment). Null: you wrote nothing "
        "through this server."
    )


class ListedItem(_Answer):
    """One memory of a listing."""

    id: UUID
    status: Literal["current", "pending", "unprojectable", "erased"] = Field(
        description="current; pending: stored, not readable yet; unprojectable: stuck "
        "(an administrator's matter); erased (with include_archived only)."
    )
    type: MemoryType
    scope: str
    project: str | None
    topic: str | None
    content: str | None = Field(description="The current version's text (null while pending).")
    belief: BeliefSummary | None = Field(description="Null while pending.")


class ListResult(_Answer):
    """Memories, newest first, and the cursor of the next page."""

    items: list[ListedItem]
    next_cursor: str | None = Field(description="Pass it as cursor for the next page.")


class HistoryVersion(_Answer):
    """One recorded version of a memory."""

    version_id: UUID
    number: int
    content: str | None = Field(description="Null once erased.")
    position: int
    recorded_at: datetime


class HistoryEvent(_Answer):
    """One event that touched the memory."""

    type: str
    position: int
    recorded_at: datetime
    principal_id: UUID | None


class HistoryResult(_Answer):
    """What was believed about a memory, and when."""

    memory_id: UUID
    type: MemoryType
    scope: str
    project: str | None
    topic: str | None
    versions: list[HistoryVersion] = Field(description="Oldest first.")
    events: list[HistoryEvent] = Field(description="Oldest first.")
    status: BeliefStatus = Field(
        description="The belief's status now, or as_of when a time or position was asked."
    )
    position: int | None = Field(description="The place in history an as-of read used.")
    belief: BeliefSummary | None = Field(
        description="The belief now, or then for an as-of read (null: pending or erased)."
    )
    content: str | None = Field(description="The text of the version believed.")


class ErasureResult(_Answer):
    """An erasure's receipt, in brief (the whole one: ``GET /v1/erasures/{id}``)."""

    erasure_id: UUID
    status: Literal["completed", "in_progress"]
    position: int = Field(description=_POSITION)
    removed_observations: int
    removed_memories: int
    removed_versions: int
    recomputed: list[UUID] = Field(description="Memories recomputed with what is left.")


class RetentionResult(_Answer):
    """The retention new captures get."""

    raw_hours: int
    transient_hours: int
    position: int | None = Field(default=None, description=_POSITION)


class ProposalItem(_Answer):
    """A forgetting-pass proposal, in brief."""

    id: UUID
    status: str
    action: str = Field(description="archive, supersede or conflict (keep when dismissed).")
    probability: float | None
    memory_id: UUID
    memory_content: str | None
    related_memory_id: UUID | None
    related_content: str | None
    changed: bool = Field(description="Either memory changed since the verdict.")


class ProposalList(_Answer):
    """Proposals, newest first."""

    items: list[ProposalItem]
    next_cursor: str | None
