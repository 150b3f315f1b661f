"""Every endpoint of the HTTP API as a typed :class:`Call`, written once.

Each function here takes an endpoint's parameters and returns what to send
and what the answer is (a model of :mod:`palimpsest.api.client.models`,
:mod:`palimpsest.api.client._beliefs` or :mod:`palimpsest.api.client._records`);
``Client`` and ``AsyncClient`` expose each one as a method that sends it and
returns the answer. Arguments left ``None`` are not sent, so the server's defaults apply
and the server alone validates (a bad value raises the problem's exception).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypedDict, TypeVar
from uuid import UUID

from pydantic_core import to_jsonable_python

from palimpsest.api.client._beliefs import (
    BeliefPublic,
    MemoryBatchPublic,
    MemoryPagePublic,
    RecallPublic,
)
from palimpsest.api.client._records import (
    DecisionPublic,
    ErasureReceipt,
    EventPagePublic,
    MemoryHistoryPublic,
    MemoryVersionsPublic,
    ObservationPagePublic,
    ObservationPublic,
    RevisionStatusPublic,
)
from palimpsest.api.client.models import (
    BatchPublic,
    CacheEvicted,
    CandidatesPublic,
    ContributionsCreated,
    CyclePublic,
    DecisionOutcome,
    EdgeCreated,
    ForgettingPolicyPublic,
    JudgeItemsPublic,
    JudgmentPublic,
    MemoryCreated,
    MemoryType,
    ObservationCreated,
    PassRunPublic,
    ProposalPagePublic,
    ProposalPublic,
    Resolution,
    RetentionPublic,
    Settled,
    VerdictsRecorded,
    VersionCreated,
)

__all__ = [
    "Call",
    "Evidence",
    "MemoryType",
    "RECALL_WAIT_S",
    "Verdict",
    "add_contributions",
    "apply_proposal",
    "batch",
    "create_edge",
    "create_memory",
    "create_observation",
    "create_version",
    "delete_tenant",
    "erase",
    "evict_cache",
    "export",
    "forget",
    "list_events",
    "list_memories",
    "list_observations",
    "list_proposals",
    "pin",
    "read_candidates",
    "read_cycle",
    "read_decision",
    "read_erasure",
    "read_forgetting_policy",
    "read_history",
    "read_judge_items",
    "read_judgment",
    "read_memories",
    "read_memory",
    "read_observation",
    "read_observation_content",
    "read_proposal",
    "read_retention",
    "read_revision",
    "read_versions",
    "recall",
    "record_verdicts",
    "reject_proposal",
    "restore",
    "retract_edge",
    "retract_observation",
    "run_cycle",
    "run_forgetting_pass",
    "settle",
    "stream_events",
    "unpin",
    "update_forgetting_policy",
    "update_judgment",
    "update_retention",
    "withdraw_model",
    "withdraw_proposer",
]

T = TypeVar("T")

Id = UUID | str

RECALL_WAIT_S = 5.0
"""The longest the server holds a recall with ``after`` back (docs/recall.md), in
seconds: added to its timeout."""


class Evidence(TypedDict):
    """An excerpt ``[start, end)`` of an observation's text, in code points."""

    observation_id: Id
    start: int
    end: int


class Verdict(TypedDict, total=False):
    """A person's verdict on a memory (``POST /v1/forgetting/verdicts``)."""

    memory_id: Id
    action: Literal["keep", "archive", "supersede", "conflict"]
    related_memory_id: Id
    confidence: float
    note: str


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request to send, and the type of its answer."""

    method: str
    path: str
    returns: Any
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    holds_for: float = 0.0
    """Seconds the server may hold the answer back (``?wait=``): added to the timeout."""
    accept: str = "application/json"


def _query(**values: Any) -> dict[str, Any]:
    """Query parameters: ``None`` left out, booleans as ``true``/``false``."""
    query: dict[str, Any] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            query[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            query[name] = value.isoformat()
        elif isinstance(value, list | tuple):
            query[name] = [str(v) for v in value]
        else:
            query[name] = str(value)
    return query


def _body(**values: Any) -> dict[str, Any]:
    """A JSON body: ``None`` left out, ids and times as JSON strings."""
    return {k: to_jsonable_python(v) for k, v in values.items() if v is not None}


# Observations


def create_observation(
    content: str,
    *,
    media_type: str | None = None,
    source: str | None = None,
    captured_at: datetime | None = None,
    transient: bool | None = None,
) -> Call[ObservationCreated]:
    """Capture a raw report (``POST /v1/observations``)."""
    body = _body(
        content=content,
        media_type=media_type,
        source=source,
        captured_at=captured_at,
        transient=transient,
    )
    return Call("POST", "/v1/observations", ObservationCreated, json=body)


def list_observations(
    *, limit: int | None = None, cursor: str | None = None
) -> Call[ObservationPagePublic]:
    """A page of the tenant's observations, newest first (``GET /v1/observations``)."""
    params = _query(limit=limit, cursor=cursor)
    return Call("GET", "/v1/observations", ObservationPagePublic, params)


def read_observation(observation_id: Id, /) -> Call[ObservationPublic]:
    """An observation's metadata and milestones."""
    return Call("GET", f"/v1/observations/{observation_id}", ObservationPublic)


def read_observation_content(observation_id: Id, /) -> Call[bytes]:
    """An observation's bytes, in the media type captured (``*/*``)."""
    return Call("GET", f"/v1/observations/{observation_id}/content", bytes, accept="*/*")


def retract_observation(
    observation_id: Id, /, *, reason: str | None = None
) -> Call[DecisionOutcome]:
    """Retract an observation as evidence (a decision)."""
    path = f"/v1/observations/{observation_id}/retract"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


# Memories: writes


def create_memory(
    content: str,
    *,
    type: MemoryType,
    scope: str,
    project: str | None = None,
    topic: str | None = None,
    evidence: Sequence[Evidence] | None = None,
    model_id: str | None = None,
    trust: float | None = None,
    importance: float | None = None,
    supersedes: Sequence[Id] | None = None,
    candidates: Literal["wait"] | None = None,
) -> Call[MemoryCreated]:
    """A new memory and its first version (``POST /v1/memories``). ``supersedes``
    names memories it replaces (at most 20): a ``supersedes`` edge to each, recorded
    with the memory. The answer's ``potential_contradictions`` are the stored memories
    it may contradict, to :func:`settle`: ``pending`` unless ready at once, or
    ``candidates="wait"`` waits for them (bounded by the server)."""
    body = _body(
        type=type,
        scope=scope,
        project=project,
        topic=topic,
        content=content,
        evidence=evidence,
        model_id=model_id,
        trust=trust,
        importance=importance,
        supersedes=None if supersedes is None else list(supersedes),
    )
    params = _query(candidates=candidates)
    return Call("POST", "/v1/memories", MemoryCreated, params, json=body)


def create_version(
    memory_id: Id,
    /,
    content: str,
    *,
    evidence: Sequence[Evidence] | None = None,
    model_id: str | None = None,
    trust: float | None = None,
    restore: bool | None = None,
    candidates: Literal["wait"] | None = None,
) -> Call[VersionCreated]:
    """A new version of a memory (``POST /v1/memories/{id}/versions``), with its
    ``potential_contradictions`` as for a new memory. A forgotten or superseded memory
    is refused (``MemoryForgottenError``, ``MemorySupersededError``) unless
    ``restore``, which restores it and records the version in one write."""
    body = _body(
        content=content, evidence=evidence, model_id=model_id, trust=trust, restore=restore
    )
    path = f"/v1/memories/{memory_id}/versions"
    return Call("POST", path, VersionCreated, _query(candidates=candidates), json=body)


def settle(memory_id: Id, other_id: Id, /, *, resolution: Resolution, reason: str) -> Call[Settled]:
    """Settle a potential contradiction between a memory and ``other_id``, one of its
    ``potential_contradictions``, as the caller judged it: ``supersedes`` (the memory
    replaces ``other_id``, which is archived) or ``both_stand`` (nothing is archived;
    recall stops marking the pair)."""
    path = f"/v1/memories/{memory_id}/candidates/{other_id}/settle"
    return Call("POST", path, Settled, json=_body(resolution=resolution, reason=reason))


def create_edge(
    memory_id: Id,
    /,
    *,
    kind: str,
    target_id: Id,
    reason: str | None = None,
) -> Call[EdgeCreated]:
    """An edge from a memory to another (an operator's decision)."""
    body = _body(kind=kind, target_id=target_id, reason=reason)
    return Call("POST", f"/v1/memories/{memory_id}/edges", EdgeCreated, json=body)


def retract_edge(
    memory_id: Id, edge_id: Id, /, *, reason: str | None = None
) -> Call[DecisionOutcome]:
    """Retract an edge from this memory."""
    path = f"/v1/memories/{memory_id}/edges/{edge_id}/retract"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def add_contributions(
    memory_id: Id,
    /,
    *,
    evidence: Sequence[Evidence],
    version_id: Id | None = None,
    model_id: str | None = None,
    trust: float | None = None,
) -> Call[ContributionsCreated]:
    """The caller's support for a version, without writing its text again."""
    body = _body(version_id=version_id, evidence=evidence, model_id=model_id, trust=trust)
    path = f"/v1/memories/{memory_id}/contributions"
    return Call("POST", path, ContributionsCreated, json=body)


def forget(memory_id: Id, /, *, reason: str) -> Call[DecisionOutcome]:
    """Archive a memory reversibly, for a reason."""
    path = f"/v1/memories/{memory_id}/forget"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def restore(memory_id: Id, /, *, reason: str | None = None) -> Call[DecisionOutcome]:
    """Reverse a forget."""
    path = f"/v1/memories/{memory_id}/restore"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def pin(memory_id: Id, /, *, reason: str | None = None) -> Call[DecisionOutcome]:
    """Pin a memory."""
    return Call("POST", f"/v1/memories/{memory_id}/pin", DecisionOutcome, json=_body(reason=reason))


def unpin(memory_id: Id, /, *, reason: str | None = None) -> Call[DecisionOutcome]:
    """Unpin a memory."""
    path = f"/v1/memories/{memory_id}/unpin"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def withdraw_proposer(
    principal_id: str, /, *, model: str | None = None, reason: str | None = None
) -> Call[DecisionOutcome]:
    """Deactivate a proposer's contributions (only ``model``'s, if given)."""
    path = f"/v1/proposers/{principal_id}/withdraw"
    return Call("POST", path, DecisionOutcome, json=_body(model=model, reason=reason))


def withdraw_model(model_id: str, /, *, reason: str | None = None) -> Call[DecisionOutcome]:
    """Deactivate a model's contributions, by any proposer."""
    path = f"/v1/proposers/model={model_id}/withdraw"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def batch(items: Sequence[Mapping[str, Any]], /) -> Call[BatchPublic]:
    """Up to 1,000 writes, all or nothing (each item has an ``op``; ``"$N"`` names item
    N's id)."""
    return Call("POST", "/v1/batch", BatchPublic, json=_body(items=list(items)))


# Memories: reads


def read_memory(
    memory_id: Id,
    /,
    *,
    wait: float | None = None,
    at_position: int | None = None,
    as_of: datetime | None = None,
) -> Call[BeliefPublic]:
    """What is believed about a memory now (``current``, or ``pending`` until revision
    catches up; ``wait`` seconds, at most 30, to wait for it), or as of a position or
    time."""
    params = _query(wait=wait, at_position=at_position, as_of=as_of)
    return Call("GET", f"/v1/memories/{memory_id}", BeliefPublic, params, holds_for=wait or 0.0)


def read_memories(
    ids: Sequence[Id], /, *, include_content: bool | None = None
) -> Call[MemoryBatchPublic]:
    """Up to 100 memories by id, in the order given, and the ids of none."""
    params = _query(ids=list(ids), include_content=include_content)
    return Call("GET", "/v1/memories/batch", MemoryBatchPublic, params)


def list_memories(
    *,
    type: MemoryType | None = None,
    scope: str | None = None,
    project: str | None = None,
    topic: str | None = None,
    status: Literal["current", "pending"] | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    at_position: int | None = None,
    as_of: datetime | None = None,
    include_archived: bool | None = None,
    include_content: bool | None = None,
) -> Call[MemoryPagePublic]:
    """A page of memories, newest first, with filters (``GET /v1/memories``)."""
    params = _query(
        type=type,
        scope=scope,
        project=project,
        topic=topic,
        status=status,
        limit=limit,
        cursor=cursor,
        at_position=at_position,
        as_of=as_of,
        include_archived=include_archived,
        include_content=include_content,
    )
    return Call("GET", "/v1/memories", MemoryPagePublic, params)


def read_history(memory_id: Id, /) -> Call[MemoryHistoryPublic]:
    """A memory's whole record, from the log."""
    return Call("GET", f"/v1/memories/{memory_id}/history", MemoryHistoryPublic)


def read_versions(memory_id: Id, /) -> Call[MemoryVersionsPublic]:
    """A memory and every version, with content and evidence."""
    return Call("GET", f"/v1/memories/{memory_id}/versions", MemoryVersionsPublic)


def read_candidates(memory_id: Id, /) -> Call[CandidatesPublic]:
    """Current memories the current version might contradict."""
    return Call("GET", f"/v1/memories/{memory_id}/candidates", CandidatesPublic)


def recall(
    query: str,
    *,
    k: int | None = None,
    type: MemoryType | None = None,
    scope: str | None = None,
    project: str | None = None,
    topic: str | None = None,
    include_archived: bool | None = None,
    include_reflections: bool | None = None,
    mode: Literal["hybrid", "vector", "text"] | None = None,
    min_similarity: float | None = None,
    after: int | None = None,
    cursor: str | None = None,
    project_under: str | None = None,
) -> Call[RecallPublic]:
    """The ``k`` best current memories for a query (``POST /v1/recall``): by meaning
    and words fused, or one of them (``mode``), at least ``min_similarity`` similar;
    ``after`` (a write's ``position``) makes it wait, bounded, until every write up to
    it is indexed (a client's ``recall`` sends its own last write's); ``cursor`` is
    the previous page's ``next_cursor``; ``project_under`` selects a project and
    those below it (``a``: ``a`` and ``a/b``)."""
    body = _body(
        query=query,
        k=k,
        type=type,
        scope=scope,
        project=project,
        project_under=project_under,
        topic=topic,
        include_archived=include_archived,
        include_reflections=include_reflections,
        mode=mode,
        min_similarity=min_similarity,
        after=after,
        cursor=cursor,
    )
    holds_for = 0.0 if after is None else RECALL_WAIT_S
    return Call("POST", "/v1/recall", RecallPublic, json=body, holds_for=holds_for)


def read_decision(decision_id: Id, /) -> Call[DecisionPublic]:
    """A decision explained."""
    return Call("GET", f"/v1/decisions/{decision_id}", DecisionPublic)


def list_events(*, after: int | None = None, limit: int | None = None) -> Call[EventPagePublic]:
    """The tenant's accepted events after a log position, oldest first."""
    return Call("GET", "/v1/events", EventPagePublic, _query(after=after, limit=limit))


def stream_events(*, after: int, limit: int | None = None) -> Call[None]:
    """The feed after ``after`` as Server-Sent Events (``limit`` more, or endless)."""
    params = _query(after=after, limit=limit)
    return Call("GET", "/v1/events/stream", None, params, accept="text/event-stream")


def read_revision() -> Call[RevisionStatusPublic]:
    """How far revision (and recall's index) has caught up in the tenant."""
    return Call("GET", "/v1/revision", RevisionStatusPublic)


# The tenant


def read_retention() -> Call[RetentionPublic]:
    """The retention new captures get."""
    return Call("GET", "/v1/tenant/retention", RetentionPublic)


def update_retention(
    *, raw_hours: int | None = None, transient_hours: int | None = None
) -> Call[RetentionPublic]:
    """Set the tenant's retention (admin)."""
    body = _body(raw_hours=raw_hours, transient_hours=transient_hours)
    return Call("PUT", "/v1/tenant/retention", RetentionPublic, json=body)


def export() -> Call[None]:
    """The tenant's export as JSON lines (admin)."""
    return Call("GET", "/v1/tenant/export", None, accept="*/*")


def read_judgment() -> Call[JudgmentPublic]:
    """Whether the tenant opted in to the forgetting pass, and its budget."""
    return Call("GET", "/v1/tenant/judgment", JudgmentPublic)


def update_judgment(
    *, enabled: bool, daily_calls: int | None = None, daily_tokens: int | None = None
) -> Call[JudgmentPublic]:
    """Opt the tenant in or out of the forgetting pass (admin)."""
    body = _body(enabled=enabled, daily_calls=daily_calls, daily_tokens=daily_tokens)
    return Call("PUT", "/v1/tenant/judgment", JudgmentPublic, json=body)


def delete_tenant(*, confirm: str | None = None, reason: str | None = None) -> Call[ErasureReceipt]:
    """Delete the tenant (admin). Without ``confirm`` it raises
    ``ConfirmationRequiredError``, whose ``confirmation_token`` confirms it."""
    params = _query(confirm=confirm, reason=reason)
    return Call("DELETE", "/v1/tenant", ErasureReceipt, params)


def read_forgetting_policy() -> Call[ForgettingPolicyPublic]:
    """The tenant's forgetting policy (the decay cycle's settings) and its version."""
    return Call("GET", "/v1/tenant/forgetting", ForgettingPolicyPublic)


def update_forgetting_policy(
    *,
    enabled: bool | None = None,
    schedule_minutes: int | None = None,
    weights: Mapping[str, float] | None = None,
    half_life_days: Mapping[str, float] | None = None,
    importance_floor: float | None = None,
    fade_below: float | None = None,
    prune_below: float | None = None,
    duplicate_floor: float | None = None,
    auto_archive_decayed: bool | None = None,
    activity_window_days: float | None = None,
    merge_similarity_floor: float | None = None,
    auto_apply_extractive_merges: bool | None = None,
    reflections_enabled: bool | None = None,
) -> Call[ForgettingPolicyPublic]:
    """Set the tenant's whole forgetting policy (admin): a field left out takes its
    default, not its previous value."""
    body = _body(
        enabled=enabled,
        schedule_minutes=schedule_minutes,
        weights=dict(weights) if weights is not None else None,
        half_life_days=dict(half_life_days) if half_life_days is not None else None,
        importance_floor=importance_floor,
        fade_below=fade_below,
        prune_below=prune_below,
        duplicate_floor=duplicate_floor,
        auto_archive_decayed=auto_archive_decayed,
        activity_window_days=activity_window_days,
        merge_similarity_floor=merge_similarity_floor,
        auto_apply_extractive_merges=auto_apply_extractive_merges,
        reflections_enabled=reflections_enabled,
    )
    return Call("PUT", "/v1/tenant/forgetting", ForgettingPolicyPublic, json=body)


def run_cycle(*, dry_run: bool | None = None) -> Call[CyclePublic]:
    """Run the decay cycle over the tenant now (admin); ``dry_run`` writes nothing."""
    return Call("POST", "/v1/cycles", CyclePublic, json=_body(dry_run=dry_run))


def read_cycle(cycle_id: Id, /) -> Call[CyclePublic]:
    """A recorded decay cycle's report."""
    return Call("GET", f"/v1/cycles/{cycle_id}", CyclePublic)


def erase(
    *,
    reason: str,
    observation_ids: Sequence[Id] | None = None,
    memory_ids: Sequence[Id] | None = None,
) -> Call[ErasureReceipt]:
    """Erase content and its lineage (admin)."""
    body = _body(
        observation_ids=list(observation_ids) if observation_ids else None,
        memory_ids=list(memory_ids) if memory_ids else None,
        reason=reason,
    )
    return Call("POST", "/v1/erasures", ErasureReceipt, json=body)


def read_erasure(erasure_id: Id, /) -> Call[ErasureReceipt]:
    """The receipt of an erasure or a tenant deletion (admin)."""
    return Call("GET", f"/v1/erasures/{erasure_id}", ErasureReceipt)


# The forgetting pass and its proposals


def list_proposals(
    *,
    status: str | None = None,
    action: str | None = None,
    type: MemoryType | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[ProposalPagePublic]:
    """A page of the forgetting pass's proposals, newest first (open ones by default)."""
    params = _query(status=status, action=action, type=type, limit=limit, cursor=cursor)
    return Call("GET", "/v1/proposals", ProposalPagePublic, params)


def read_proposal(proposal_id: Id, /) -> Call[ProposalPublic]:
    """One proposal, as listed."""
    return Call("GET", f"/v1/proposals/{proposal_id}", ProposalPublic)


def apply_proposal(
    proposal_id: Id,
    /,
    *,
    reason: str | None = None,
    resolution: Literal["archive_older", "supersede"] | None = None,
    confirm_bulk: bool | None = None,
) -> Call[DecisionOutcome]:
    """Apply a proposal (a decision)."""
    body = _body(reason=reason, resolution=resolution, confirm_bulk=confirm_bulk)
    return Call("POST", f"/v1/proposals/{proposal_id}/apply", DecisionOutcome, json=body)


def reject_proposal(proposal_id: Id, /, *, reason: str) -> Call[DecisionOutcome]:
    """Reject a proposal (a decision)."""
    path = f"/v1/proposals/{proposal_id}/reject"
    return Call("POST", path, DecisionOutcome, json=_body(reason=reason))


def record_verdicts(
    verdicts: Sequence[Verdict], /, *, judge: str | None = None
) -> Call[VerdictsRecorded]:
    """A person's verdicts as proposals, all or nothing."""
    body = _body(verdicts=list(verdicts), judge=judge)
    return Call("POST", "/v1/forgetting/verdicts", VerdictsRecorded, json=body)


def read_judge_items() -> Call[JudgeItemsPublic]:
    """What the forgetting pass would send a judge now."""
    return Call("GET", "/v1/forgetting/items", JudgeItemsPublic)


def run_forgetting_pass(*, dry_run: bool | None = None) -> Call[PassRunPublic]:
    """Run the forgetting pass over the tenant now (admin)."""
    return Call("POST", "/v1/forgetting/runs", PassRunPublic, json=_body(dry_run=dry_run))


def evict_cache() -> Call[CacheEvicted]:
    """Drop this process's cached memory versions of the tenant (admin)."""
    return Call("POST", "/v1/admin/cache/evict", CacheEvicted)
