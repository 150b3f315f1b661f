"""The projection function: what palimpsest currently believes about one memory.

``project_belief`` is pure: the same facts give the same belief, so live
reads, as-of reads, rebuild and verify can all call it and agree. It points
at version ids and never carries claim text.

Grading rule (documented in docs/revision.md):

- ``contested`` while an open ``conflicts_with`` edge joins the memory to
  another memory (in either direction); a conflict is resolved, no longer
  open, once either of the two supersedes the other;
- otherwise ``corroborated`` with active support from at least two distinct
  observations, ``supported`` with one, ``unsupported`` with none.

Labels: ``superseded_by`` (memories with a live ``supersedes`` edge to it),
``archived``, ``pinned`` and ``erased``; every label and the grade have a
reason.

Archival: a memory is archived (hidden from ordinary reads, listings and
recall) when it is forgotten (the forget's reason and decision), or
structurally when a live ``supersedes`` edge points at it: superseded, or the
losing side of a conflict resolved by supersession (``reason``
``"superseded"``, the superseding memory and the edge). A forget is shown
first when both hold; ``restore`` reverses only the forget, and retracting
the edge (a decision) ends the structural archival. An edge is live until a
decision retracts it (``retracted_edges``).

Erasure: the current version is the newest one whose content is not erased;
a memory with none left (or erased itself) projects to a placeholder naming
the erasure, with no version and no support.

Support counts contributions to the *current* version that are active and
whose trust is above zero; several excerpts of one observation count once,
because they are one source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from palimpsest.domain.salience import confidence

__all__ = [
    "Archival",
    "ArchiveFact",
    "Belief",
    "ContributionFact",
    "EdgeFact",
    "Grade",
    "MemoryFacts",
    "Reason",
    "project_belief",
]

Grade = Literal["corroborated", "supported", "unsupported", "contested"]


@dataclass(frozen=True)
class ContributionFact:
    """A contribution as the projection sees it: which version and source, and if active."""

    contribution_id: UUID
    version_id: UUID
    observation_id: UUID
    proposer_id: UUID
    model_id: str | None
    trust: float
    active: bool = True
    deactivated_by: UUID | None = None
    """The decision that deactivated it, once inactive."""


@dataclass(frozen=True)
class EdgeFact:
    """An edge between two memories, with the log position that recorded it."""

    edge_id: UUID
    kind: str
    source_id: UUID
    target_id: UUID
    position: int


@dataclass(frozen=True)
class ArchiveFact:
    """A reversible archival (a forget): why, and which decision recorded it."""

    reason: str
    decision_id: UUID


@dataclass(frozen=True)
class Archival:
    """Why a belief is archived: a forget (``reason`` and ``decision_id``), or
    structurally (``reason`` ``"superseded"``, with ``superseded_by`` and ``edge_id``)."""

    reason: str
    decision_id: UUID | None = None
    """The forget's decision (structural archival has none of its own)."""
    superseded_by: UUID | None = None
    """The memory whose ``supersedes`` edge archives this one (the earliest live edge)."""
    edge_id: UUID | None = None
    """That edge: retracting it (a decision) ends the archival."""

    @property
    def structural(self) -> bool:
        """Whether the archival follows from an edge (not reversible by ``restore``)."""
        return self.superseded_by is not None


@dataclass(frozen=True)
class MemoryFacts:
    """Everything recorded about one memory that its labels depend on."""

    memory_id: UUID
    memory_type: str
    scope: str
    project: str | None
    topic: str | None
    version_ids: tuple[UUID, ...]
    contributions: tuple[ContributionFact, ...] = ()
    edges: tuple[EdgeFact, ...] = field(default=())
    """Edges from this memory and edges from other memories to it."""
    archived: ArchiveFact | None = None
    """The forget that archived it, if any (the forgetting issue records these)."""
    pinned: bool = False
    erased_versions: tuple[UUID, ...] = ()
    """Versions whose content an erasure removed: never current again."""
    erased_by: UUID | None = None
    """The erasure that removed the memory (or its last live version), if any."""
    retracted_edges: frozenset[UUID] = frozenset()
    """Edges touching this memory that a decision retracted: they no longer count."""


@dataclass(frozen=True)
class Reason:
    """A machine-readable explanation of one label or grade."""

    code: str
    refs: tuple[tuple[str, str], ...]

    def as_dict(self) -> dict[str, str]:
        """Return the reason as a flat mapping of code and references."""
        return {"code": self.code, **dict(self.refs)}


@dataclass(frozen=True)
class Belief:
    """The current belief about one memory."""

    memory_id: UUID
    current_version_id: UUID | None
    """None only once the memory is erased."""
    grade: Grade
    support: tuple[UUID, ...]
    alternatives: tuple[UUID, ...]
    superseded_by: tuple[UUID, ...]
    archived: Archival | None
    """Forgotten, or structurally archived (superseded); None when neither."""
    pinned: bool
    scope: str
    project: str | None
    reasons: tuple[Reason, ...]
    confidence: float = 1.0
    """The base of salience: the grade's weight times the mean trust of the support
    (:func:`palimpsest.domain.salience.confidence`)."""
    erased_by: UUID | None = None
    """The erasure decision, once the memory is erased: reads answer a placeholder."""


def _sorted(ids: Iterable[UUID]) -> tuple[UUID, ...]:
    return tuple(sorted(set(ids), key=str))


def _erased_belief(memory: MemoryFacts) -> Belief:
    """Return the placeholder belief of an erased memory: no version, no support."""
    decision = memory.erased_by
    refs = () if decision is None else (("decision_id", str(decision)),)
    return Belief(
        memory_id=memory.memory_id,
        current_version_id=None,
        grade="unsupported",
        support=(),
        alternatives=(),
        superseded_by=(),
        archived=None,
        pinned=False,
        scope=memory.scope,
        project=memory.project,
        reasons=(Reason("erased", refs),),
        confidence=0.0,
        erased_by=decision,
    )


def _archival(memory: MemoryFacts, supersessors: list[EdgeFact]) -> Archival | None:
    """Return why the memory is archived: its forget first, else its earliest live
    ``supersedes`` edge (``supersessors`` are in log order)."""
    if memory.archived is not None:
        return Archival(memory.archived.reason, decision_id=memory.archived.decision_id)
    if supersessors:
        edge = supersessors[0]
        return Archival("superseded", superseded_by=edge.source_id, edge_id=edge.edge_id)
    return None


def _label_reasons(memory: MemoryFacts, supersessors: list[EdgeFact]) -> list[Reason]:
    """Return the reasons of the archived and pinned labels."""
    reasons = []
    if supersessors:
        edge = supersessors[0]
        reasons.append(
            Reason(
                "archived_structurally",
                (
                    ("reason", "superseded"),
                    ("by", str(edge.source_id)),
                    ("edge_id", str(edge.edge_id)),
                ),
            )
        )
    if memory.archived is not None:
        reasons.append(
            Reason(
                "archived",
                (
                    ("reason", memory.archived.reason),
                    ("decision_id", str(memory.archived.decision_id)),
                ),
            )
        )
    if memory.pinned:
        reasons.append(Reason("pinned", ()))
    return reasons


def project_belief(memory: MemoryFacts) -> Belief:
    """Return the belief that the recorded facts about ``memory`` support.

    Raises:
        ValueError: the memory has no version (every memory is created with one).
    """
    if not memory.version_ids:
        msg = f"memory {memory.memory_id} has no version"
        raise ValueError(msg)
    live = [v for v in memory.version_ids if v not in memory.erased_versions]
    if memory.erased_by is not None or not live:
        return _erased_belief(memory)
    current = live[-1]
    reasons: list[Reason] = [Reason("current_version", (("version_id", str(current)),))]

    support = [
        c for c in memory.contributions if c.version_id == current and c.active and c.trust > 0
    ]
    inactive = [c for c in memory.contributions if c.version_id == current and not c.active]
    for c in inactive:
        reasons.append(Reason("support_inactive", (("contribution_id", str(c.contribution_id)),)))

    live_edges = [e for e in memory.edges if e.edge_id not in memory.retracted_edges]
    supersessors: list[EdgeFact] = []
    superseded_by: list[UUID] = []
    conflicts: list[UUID] = []
    for edge in sorted(live_edges, key=lambda e: (e.position, str(e.edge_id))):
        if edge.kind == "supersedes" and edge.target_id == memory.memory_id:
            supersessors.append(edge)
            superseded_by.append(edge.source_id)
            reasons.append(
                Reason("superseded", (("by", str(edge.source_id)), ("edge_id", str(edge.edge_id))))
            )
        elif edge.kind == "conflicts_with" and memory.memory_id in (edge.source_id, edge.target_id):
            other = edge.target_id if edge.source_id == memory.memory_id else edge.source_id
            conflicts.append(other)
            reasons.append(
                Reason("conflict", (("with", str(other)), ("edge_id", str(edge.edge_id))))
            )

    resolved = {
        e.target_id
        for e in live_edges
        if e.kind == "supersedes" and e.source_id == memory.memory_id
    }
    resolved.update(superseded_by)
    for other in sorted(set(conflicts) & resolved, key=str):
        reasons.append(Reason("conflict_resolved", (("with", str(other)),)))
    conflicts = [c for c in conflicts if c not in resolved]

    sources = _sorted(c.observation_id for c in support)
    grade: Grade
    if conflicts:
        grade = "contested"
    elif len(sources) >= 2:
        grade = "corroborated"
    elif len(sources) == 1:
        grade = "supported"
    else:
        grade = "unsupported"
    reasons.append(Reason("grade", (("grade", grade), ("sources", ",".join(map(str, sources))))))
    reasons.extend(_label_reasons(memory, supersessors))

    return Belief(
        memory_id=memory.memory_id,
        current_version_id=current,
        grade=grade,
        support=_sorted(c.contribution_id for c in support),
        alternatives=_sorted(conflicts),
        superseded_by=_sorted(superseded_by),
        archived=_archival(memory, supersessors),
        pinned=memory.pinned,
        scope=memory.scope,
        project=memory.project,
        reasons=tuple(reasons),
        confidence=confidence(grade, [c.trust for c in support]),
    )
