"""What a write's events make other memories depend on.

The revision watermark needs, in the transaction that records an event, the
set of memories whose labels that event can change. These rows let it find
them: links between memories (edges, stored in both directions), which
observations each memory cites, and whose contributions support it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

from palimpsest.domain.cycle import Cycle
from palimpsest.domain.decision import Decision
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.domain.proposal import Proposal
from palimpsest.domain.reflection import Reflection
from palimpsest.domain.tenant import Tenant

__all__ = [
    "CycleRow",
    "Dependencies",
    "Link",
    "ProposalRow",
    "ReflectionRow",
    "dependencies_of",
]


@dataclass(frozen=True)
class Link:
    """One direction of an edge: ``memory_id`` is linked to ``linked_id``."""

    memory_id: UUID
    linked_id: UUID
    kind: str
    outgoing: bool
    """Whether ``memory_id`` is the edge's source."""
    edge_id: UUID


@dataclass(frozen=True)
class ProposalRow:
    """A recorded proposal, as its read-model row holds it."""

    proposal_id: UUID
    memory_id: UUID
    related_memory_id: UUID | None
    action: str
    status: str
    probability: float | None
    model: str
    run_id: UUID
    created_at: datetime
    source_ids: tuple[UUID, ...]
    """The memories it saw (a merge's sources), in order."""


@dataclass(frozen=True)
class ReflectionRow:
    """A recorded reflection, as its read-model row holds it."""

    reflection_id: UUID
    scope: str
    project: str | None
    model: str
    content_digest: str
    source_ids: tuple[UUID, ...]
    created_at: datetime


@dataclass(frozen=True)
class CycleRow:
    """A recorded decay cycle, as its read-model rows hold it."""

    cycle_id: UUID
    snapshot_at: datetime
    policy_version: int
    report: dict[str, object]
    faded: tuple[UUID, ...]
    unfaded: tuple[UUID, ...]


@dataclass
class Dependencies:
    """The dependency rows of one write, and the memories it touches directly."""

    touched: set[UUID] = field(default_factory=set)
    links: list[Link] = field(default_factory=list)
    evidence: set[tuple[UUID, UUID]] = field(default_factory=set)
    """(observation id, memory id) pairs."""
    proposers: set[tuple[UUID, str, UUID]] = field(default_factory=set)
    """(proposer id, model id or "", memory id) triples."""
    created: list[tuple[UUID, str, str, str | None, str | None]] = field(default_factory=list)
    """(memory id, type, scope, project, topic) of memories created by the write."""
    captured: list[tuple[UUID, str, datetime, bool]] = field(default_factory=list)
    """(observation id, content digest, retention deadline, transient) of captures."""
    expired: list[UUID] = field(default_factory=list)
    """Observations whose bytes this write deletes."""
    version_digests: set[tuple[str, UUID]] = field(default_factory=set)
    """(content digest, memory id) of recorded versions: payloads expiry must keep."""
    retention: tuple[int, int] | None = None
    """(raw hours, transient hours) a tenant set in this write, if it did."""
    shortened: list[tuple[UUID, datetime]] = field(default_factory=list)
    """(observation id, new deadline) of deadlines moved earlier."""
    decisions: list[tuple[UUID, str, str, UUID | None]] = field(default_factory=list)
    """(decision id, kind, logical key, decision it is part of) of recorded decisions,
    so replays are found, and a tenant deletion finds its erasure batches."""
    erased: list[UUID] = field(default_factory=list)
    """Observations whose content this write erases (their bytes are deleted with it)."""
    retracted: list[UUID] = field(default_factory=list)
    """Observations this write retracts as evidence."""
    memories_erased: list[UUID] = field(default_factory=list)
    """Memories this write erases."""
    versions_erased: list[UUID] = field(default_factory=list)
    """Versions whose content this write erases (their embeddings go with it)."""
    content_lost: set[UUID] = field(default_factory=set)
    """Memories with a version whose content this write erases: what was drawn from
    them (derived memories, reflections, merge texts) must go in the same write."""
    released: set[tuple[str, UUID]] = field(default_factory=set)
    """(content digest, memory id) no live version of the memory holds any more."""
    deletion_requested: UUID | None = None
    """The decision of a tenant deletion this write requests, if it does."""
    deletion_completed: UUID | None = None
    """The decision of a tenant deletion this write completes, if it does."""
    proposals: list[ProposalRow] = field(default_factory=list)
    """Proposals this write records (the forgetting pass's verdicts)."""
    proposals_decided: list[tuple[UUID, str, UUID, datetime, str | None]] = field(
        default_factory=list
    )
    """(proposal id, applied or rejected, decision id, when, effect) of proposals decided."""
    cycles: list[CycleRow] = field(default_factory=list)
    """Decay cycles this write records (with the memories they fade and unfade)."""
    cycles_consolidated: list[tuple[UUID, dict[str, object]]] = field(default_factory=list)
    """(cycle id, consolidation's summary) of decay cycles whose consolidation this
    write records."""
    reflections: list[ReflectionRow] = field(default_factory=list)
    """Reflections this write records (consolidation's second pass)."""
    reflections_redacted: list[tuple[UUID, str]] = field(default_factory=list)
    """(reflection id, content digest) of reflections whose text this write erases."""
    merge_texts_erased: list[tuple[UUID, str]] = field(default_factory=list)
    """(proposal id, content digest) of merge proposals whose text this write erases."""


def _memory_event(found: Dependencies, event: object) -> None:
    """Add what a ``Memory`` event makes others depend on."""
    if isinstance(event, Memory.EdgeAdded):
        found.touched.update((event.originator_id, event.target_id))
        found.links.append(
            Link(event.originator_id, event.target_id, event.kind, True, event.edge_id)
        )
        found.links.append(
            Link(event.target_id, event.originator_id, event.kind, False, event.edge_id)
        )
    elif isinstance(event, Memory.ContributionAdded):
        found.touched.add(event.originator_id)
        observation = UUID(str(event.excerpt["observation_id"]))
        found.evidence.add((observation, event.originator_id))
        found.proposers.add((event.proposer_id, event.model_id or "", event.originator_id))
    elif isinstance(event, Memory.Created):
        found.touched.add(event.originator_id)
        found.created.append(
            (event.originator_id, event.memory_type, event.scope, event.project, event.topic)
        )
    elif isinstance(event, Memory.Erased):
        found.touched.add(event.originator_id)
        found.memories_erased.append(event.originator_id)
    elif isinstance(event, Memory.VersionErased):
        found.touched.add(event.originator_id)
        found.versions_erased.append(event.version_id)
        found.content_lost.add(event.originator_id)
        if event.release_digest:
            found.released.add((event.content_digest, event.originator_id))
    elif isinstance(event, Memory.VersionRecorded):
        found.touched.add(event.originator_id)
        found.version_digests.add((event.content_digest, event.originator_id))
    elif isinstance(event, Memory.Event):
        # Deactivations, archival, restore, pin, unpin: they change labels only.
        found.touched.add(event.originator_id)


def _other_event(found: Dependencies, event: object) -> None:
    """Add what an observation, tenant or decision event makes others depend on."""
    if isinstance(event, Observation.Created):
        found.captured.append(
            (event.originator_id, event.digest, event.retention_deadline, event.transient)
        )
    elif isinstance(event, Observation.Expired):
        found.expired.append(event.originator_id)
    elif isinstance(event, Observation.Erased):
        found.erased.append(event.originator_id)
    elif isinstance(event, Observation.Retracted):
        found.retracted.append(event.originator_id)
    elif isinstance(event, Observation.DeadlineShortened):
        found.shortened.append((event.originator_id, event.deadline))
    elif isinstance(event, Tenant.RetentionSet):
        found.retention = (event.raw_hours, event.transient_hours)
    elif isinstance(event, Tenant.DeletionRequested):
        found.deletion_requested = event.decision_id
    elif isinstance(event, Tenant.Deleted):
        found.deletion_completed = event.decision_id
    elif isinstance(event, Cycle.Created):
        found.cycles.append(_cycle_row(event))
    elif isinstance(event, Cycle.Consolidated):
        found.cycles_consolidated.append((event.originator_id, dict(event.summary)))

    elif isinstance(event, Decision.Created):
        part_of = event.params.get("part_of")
        within = UUID(str(part_of)) if part_of else None
        found.decisions.append((event.originator_id, event.kind, event.logical_key, within))


def _proposal_event(found: Dependencies, event: object) -> None:
    """Add a proposal's row, its decision, or the erasure of a merge's text."""
    if isinstance(event, Proposal.Created):
        found.proposals.append(
            ProposalRow(
                event.originator_id,
                event.memory_id,
                event.related_memory_id,
                event.action,
                event.status,
                event.probability,
                event.model,
                event.run_id,
                event.timestamp,
                tuple(UUID(s["memory_id"]) for s in event.seen),
            )
        )
    elif isinstance(event, Proposal.TextErased):
        found.merge_texts_erased.append((event.originator_id, event.content_digest))
    elif isinstance(event, Proposal.Decided):
        found.proposals_decided.append(
            (event.originator_id, event.status, event.decision_id, event.timestamp, event.effect)
        )


def _cycle_row(event: Cycle.Created) -> CycleRow:
    report: dict[str, object] = {
        "snapshot_at": event.snapshot_at.isoformat(),
        "policy_version": event.policy_version,
        "counts": event.counts,
        "by_type": event.by_type,
        "duplicates": event.duplicates,
        "faded": event.faded,
        "unfaded": event.unfaded,
        "proposals": event.proposals,
        "archived": event.archived,
    }
    # Absent from cycles recorded before the fields were: unknown, never a made-up 0.
    if event.held_back is not None:
        report["held_back"] = event.held_back
    if event.importance_fallbacks is not None:
        report["importance_fallbacks"] = event.importance_fallbacks
    return CycleRow(
        event.originator_id,
        event.snapshot_at,
        event.policy_version,
        report,
        tuple(UUID(i) for i in event.faded),
        tuple(UUID(i) for i in event.unfaded),
    )


def _reflection_event(found: Dependencies, event: object) -> None:
    """Add a reflection's row, or its redaction (no memory depends on a reflection)."""
    if isinstance(event, Reflection.Created):
        found.reflections.append(
            ReflectionRow(
                event.originator_id,
                event.scope,
                event.project,
                event.model,
                event.content_digest,
                tuple(UUID(s["memory_id"]) for s in event.sources),
                event.timestamp,
            )
        )
    elif isinstance(event, Reflection.Redacted):
        found.reflections_redacted.append((event.originator_id, event.content_digest))


def dependencies_of(events: Iterable[object]) -> Dependencies:
    """Return the dependency rows and directly touched memories of ``events``."""
    found = Dependencies()
    for event in events:
        if isinstance(event, Memory.Event):
            _memory_event(found, event)
        elif isinstance(event, Reflection.Event):
            _reflection_event(found, event)
        elif isinstance(event, Proposal.Event):
            _proposal_event(found, event)
        else:
            _other_event(found, event)
    return found
