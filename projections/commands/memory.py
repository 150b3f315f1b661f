"""Writing memories: a new memory (and what it supersedes), a new version of one
(refused, or restored first, when the memory is archived), an edge between two (and
its retraction), and the evidence check every citation goes through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from palimpsest.domain.errors import (
    EdgeExistsError,
    EvidenceErasedError,
    EvidenceRetractedError,
    MemoryForgottenError,
    MemorySupersededError,
    NotFoundError,
)
from palimpsest.domain.evidence import Excerpt, cut_excerpt
from palimpsest.domain.limits import MAX_VERSION_BYTES, encode_content
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.projections.commands._spec import Batch, Id, WriteSpec
from palimpsest.projections.commands.decisions import (
    LabelSpec,
    Operations,
    decide_label,
    record_decision,
    seen_version,
    superseding_edges,
)
from palimpsest.projections.commands.unit_of_work import Item

__all__ = [
    "EdgeRetractSpec",
    "EdgeSpec",
    "EvidenceSpec",
    "IfArchived",
    "MemorySpec",
    "VersionSpec",
    "cite_evidence",
    "new_memory",
    "new_version",
    "refuse_unless_current",
]

IfArchived = Literal["record", "refuse", "restore"]
"""What a revision of an archived memory does: ``refuse`` it (a problem naming why),
``restore`` the memory first in the same write, or ``record`` it and leave the
memory archived (the write path's own callers, which decide for themselves)."""

_RESTORED_BY_REVISION = "revised with restore: true"
"""The reason recorded with the decisions that restore a memory to revise it."""


@dataclass(frozen=True)
class EvidenceSpec:
    """An excerpt ``[start, end)`` (code points) of an observation, cited as support."""

    observation_id: Id
    start: int
    end: int


@dataclass(frozen=True)
class MemorySpec(WriteSpec):
    """Create a memory with its first version."""

    role = "writer"
    action = "create memories"

    memory_type: str
    scope: str
    project: str | None
    topic: str | None
    content: str
    evidence: tuple[EvidenceSpec, ...]
    model_id: str | None
    trust: float
    importance: float | None = None
    """How much the memory matters (0 to 1), for the decay cycle; None: estimated."""
    supersedes: tuple[UUID, ...] = ()
    """Memories the new one supersedes: a ``supersedes`` edge to each, each an
    ``add_edge`` decision, in the same write."""

    def apply(self, batch: Batch) -> Item:
        """Create the memory in ``batch`` (:func:`new_memory`)."""
        return new_memory(batch, self)


@dataclass(frozen=True)
class VersionSpec(WriteSpec):
    """Record a new version of an existing memory."""

    role = "writer"
    action = "record versions"

    memory_id: Id
    content: str
    evidence: tuple[EvidenceSpec, ...]
    model_id: str | None
    trust: float
    if_archived: IfArchived = "record"
    """What to do when the memory is forgotten or superseded (the API asks for
    ``refuse`` or ``restore``; never a silent revision of an archived memory)."""

    def apply(self, batch: Batch) -> Item:
        """Record the version in ``batch`` (:func:`new_version`)."""
        return new_version(batch, self)


@dataclass(frozen=True)
class EdgeSpec(WriteSpec):
    """Add an edge from one memory to another."""

    role = "writer"
    action = "add edges"

    memory_id: Id
    kind: str
    target_id: Id
    reason: str | None = None

    def apply(self, batch: Batch) -> Item:
        """Add the edge as an operator's decision; the same edge again replays it.

        Raises:
            EdgeExistsError: the edge exists and no decision of ours added it.
        """
        uow = batch.uow
        source = uow.load(batch.resolve(self.memory_id), Memory, "memory")
        target = uow.load(batch.resolve(self.target_id), Memory, "target memory")

        def take(decision_id: UUID) -> Operations:
            if source.has_edge(self.kind, target.id):
                return [], [], []
            edge_id = source.add_edge(
                self.kind, target, principal_id=uow.caller.principal_id, decision_id=decision_id
            )
            accepted = {
                "op": "add_edge",
                "edge_id": str(edge_id),
                "memory_id": str(source.id),
                "kind": self.kind,
                "target_id": str(target.id),
            }
            return [accepted], [], [seen_version(source), seen_version(target)]

        decided = record_decision(
            uow,
            kind="add_edge",
            subject=f"memory:{source.id}",
            params={"kind": self.kind, "target_id": str(target.id)},
            inputs=[
                {"kind": "memory", "id": str(source.id)},
                {"kind": "memory", "id": str(target.id)},
            ],
            take=take,
            nothing_to_do=EdgeExistsError(
                f"memory {source.id} already has a {self.kind!r} edge to {target.id}"
            ),
            reason=self.reason,
        )
        edge = decided.fields["accepted"][0]
        return Item(
            UUID(edge["edge_id"]),
            decided.last_event,
            {
                "id": edge["edge_id"],
                "memory_id": edge["memory_id"],
                "kind": edge["kind"],
                "target_id": edge["target_id"],
                "decision_id": decided.fields["id"],
                "replayed": decided.fields["replayed"],
            },
            position=decided.position,
        )


@dataclass(frozen=True)
class EdgeRetractSpec(WriteSpec):
    """Retract an edge from one memory to another, as a decision: it stops counting
    (a supersession ends, a conflict is no longer open), on both memories."""

    role = "writer"
    action = "retract edges"

    memory_id: UUID
    """The edge's source: the memory it was added from."""
    edge_id: UUID
    reason: str | None

    def apply(self, batch: Batch) -> Item:
        """Record ``EdgeRetracted`` on both memories under one ``retract_edge``
        decision; retracting it again replays that decision.

        Raises:
            NotFoundError: the memory has no such edge (from it), live or retracted.
        """
        uow = batch.uow
        source = uow.load(self.memory_id, Memory, "memory")
        live = source.edge(self.edge_id)
        if live is None and self.edge_id not in source.retracted_edges:
            msg = f"memory {source.id} has no edge {self.edge_id} (retract it from its source)"
            raise NotFoundError(msg)
        principal_id = uow.caller.principal_id

        def take(decision_id: UUID) -> Operations:
            if live is None:
                return [], [], []
            kind, target_id = live
            target = uow.load(target_id, Memory, "target memory")
            for memory in (source, target):
                memory.retract_edge(
                    self.edge_id, decision_id=decision_id, principal_id=principal_id
                )
            accepted = {
                "op": "retract_edge",
                "edge_id": str(self.edge_id),
                "memory_id": str(source.id),
                "kind": kind,
                "target_id": str(target.id),
            }
            return [accepted], [], [seen_version(source), seen_version(target)]

        return record_decision(
            uow,
            kind="retract_edge",
            subject=f"memory:{source.id}",
            params={"edge_id": str(self.edge_id)},
            inputs=[
                {"kind": "memory", "id": str(source.id)},
                {"kind": "edge", "id": str(self.edge_id)},
            ],
            take=take,
            nothing_to_do=None,
            reason=self.reason,
        )


def new_memory(batch: Batch, spec: MemorySpec) -> Item:
    """Create the memory ``spec`` asks for in ``batch``'s unit of work: the
    :class:`~palimpsest.domain.memory.Memory` with its first version, and its
    ``supersedes`` edges (as the edges API adds them). Nothing is recorded until the
    unit of work is.

    Raises:
        NotFoundError: a cited observation, or a memory it supersedes, is unknown.
        EdgeNotAllowedError: a memory it supersedes cannot be superseded by it.
        InvalidInputError, EvidenceErasedError, EvidenceRetractedError,
            EvidenceOutOfRangeError: its content or evidence is refused.
    """
    uow = batch.uow
    memory = Memory.create(
        tenant_id=uow.caller.tenant_id,
        memory_type=spec.memory_type,
        scope=spec.scope,
        project=spec.project,
        topic=spec.topic,
        principal_id=uow.caller.principal_id,
        importance=spec.importance,
    )
    version_id = _record_version(
        batch, memory, spec.content, spec.evidence, spec.model_id, spec.trust
    )
    uow.add(memory)
    fields: dict[str, object] = {"id": str(memory.id), "version_id": str(version_id)}
    last_event: tuple[UUID, int] | None = (memory.id, memory.version)
    superseded = []
    for target_id in dict.fromkeys(spec.supersedes):
        edge = EdgeSpec(memory.id, "supersedes", target_id).apply(batch)
        # The decision is recorded after the memory: its event ends the write.
        last_event = edge.last_event or last_event
        superseded.append(
            {
                "edge_id": edge.fields["id"],
                "target_id": edge.fields["target_id"],
                "decision_id": edge.fields["decision_id"],
            }
        )
    if superseded:
        fields["supersedes"] = superseded
    return Item(memory.id, last_event, fields)


def new_version(batch: Batch, spec: VersionSpec) -> Item:
    """Record the version ``spec`` asks for on its memory (loaded, or made earlier in
    the batch) in ``batch``'s unit of work; first restore the memory, in the same
    write, when it is archived and ``spec.if_archived`` says ``restore``.

    Raises:
        NotFoundError: the memory, or a cited observation, is unknown.
        MemoryForgottenError, MemorySupersededError: it is archived and
            ``spec.if_archived`` says ``refuse``.
        InvalidInputError, EvidenceErasedError, EvidenceRetractedError,
            EvidenceOutOfRangeError: its content or evidence is refused.
    """
    memory = batch.uow.load(batch.resolve(spec.memory_id), Memory, "memory")
    if spec.if_archived == "refuse":
        refuse_unless_current(
            batch,
            memory,
            if_forgotten="revise it with restore: true to restore it and record the "
            f"version in one write, or restore it first (POST /v1/memories/{memory.id}"
            "/restore)",
            if_superseded="revise the newer memory if it holds the claim now, or revise "
            "this one with restore: true to retract the superseding edge and record "
            "the version in one write",
        )
    elif spec.if_archived == "restore":
        _restore(batch, memory)
    version_id = _record_version(
        batch, memory, spec.content, spec.evidence, spec.model_id, spec.trust
    )
    return Item(
        memory.id,
        (memory.id, memory.version),
        {"memory_id": str(memory.id), "version_id": str(version_id)},
    )


def refuse_unless_current(
    batch: Batch, memory: Memory, *, if_forgotten: str, if_superseded: str
) -> None:
    """Refuse a write that needs ``memory`` current while it is archived, naming why
    and (``if_forgotten``, ``if_superseded``: what the caller can do) how to go on.
    An erased memory is left to the write's own refusal.

    Raises:
        MemoryForgottenError: it was forgotten.
        MemorySupersededError: a live ``supersedes`` edge points at it.
    """
    if memory.erased_by is not None:
        return
    if memory.archived is not None:
        msg = (
            f"memory {memory.id} was forgotten (decision {memory.archived.decision_id}: "
            f"{memory.archived.reason!r}); {if_forgotten}"
        )
        raise MemoryForgottenError(msg)
    edges = superseding_edges(batch.uow, memory)
    if edges:
        named = ", ".join(f"memory {source} (edge {edge_id})" for source, edge_id in edges)
        msg = f"memory {memory.id} is superseded by {named}; {if_superseded}"
        raise MemorySupersededError(msg)


def _restore(batch: Batch, memory: Memory) -> None:
    """Make ``memory`` current again in this write: reverse its forget, and retract
    every live ``supersedes`` edge to it, each by its own recorded decision (as
    ``restore`` and the edge's retraction record them)."""
    if memory.erased_by is not None:
        return  # recording the version refuses it
    uow = batch.uow
    if memory.archived is not None:
        decide_label(uow, LabelSpec(memory.id, "restore", _RESTORED_BY_REVISION))
    for source, edge_id in superseding_edges(uow, memory):
        EdgeRetractSpec(source, edge_id, _RESTORED_BY_REVISION).apply(batch)


def cite_evidence(batch: Batch, evidence: tuple[EvidenceSpec, ...]) -> tuple[Excerpt, ...]:
    """Return the excerpts ``evidence`` cites, each checked against its observation.

    Raises:
        NotFoundError: an observation is unknown.
        EvidenceErasedError: an observation was erased.
        EvidenceRetractedError: an observation was retracted as evidence.
        InvalidInputError: an observation has no content left to cite.
        EvidenceOutOfRangeError: the offsets fall outside its content.
    """
    uow = batch.uow
    excerpts: list[Excerpt] = []
    for cited in evidence:
        observation = uow.load(batch.resolve(cited.observation_id), Observation, "observation")
        if observation.erased_by is not None:
            msg = (
                f"observation {observation.id} was erased "
                f"(decision {observation.erased_by}) and cannot be cited"
            )
            raise EvidenceErasedError(msg)
        if observation.retracted_by is not None:
            msg = (
                f"observation {observation.id} was retracted as evidence "
                f"(decision {observation.retracted_by}) and cannot be cited"
            )
            raise EvidenceRetractedError(msg)
        excerpts.append(
            cut_excerpt(observation.id, uow.content_of(observation), cited.start, cited.end)
        )
    return tuple(excerpts)


def _record_version(
    batch: Batch,
    memory: Memory,
    content: str,
    evidence: tuple[EvidenceSpec, ...],
    model_id: str | None,
    trust: float,
) -> UUID:
    """Record a version citing ``evidence``, each excerpt checked against its observation."""
    uow = batch.uow
    data = encode_content(
        content, limit_bytes=MAX_VERSION_BYTES, what="memory content", allow_blank=False
    )
    excerpts = cite_evidence(batch, evidence)
    return memory.record_version(
        content_digest=uow.store_payload(data),
        size_bytes=len(data),
        excerpts=excerpts,
        principal_id=uow.caller.principal_id,
        model_id=model_id,
        trust=trust,
    )
