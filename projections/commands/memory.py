"""Writing memories: a new memory, a new version of one, an edge between two (and
its retraction), and the evidence check every citation goes through."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from palimpsest.domain.errors import (
    EdgeExistsError,
    EvidenceErasedError,
    EvidenceRetractedError,
    NotFoundError,
)
from palimpsest.domain.evidence import Excerpt, cut_excerpt
from palimpsest.domain.limits import MAX_VERSION_BYTES, encode_content
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.projections.commands.decisions import Operations, record_decision, seen_version
from palimpsest.projections.commands.spec import Batch, Id, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item

__all__ = [
    "EdgeRetractSpec",
    "EdgeSpec",
    "EvidenceSpec",
    "MemorySpec",
    "VersionSpec",
    "cite_evidence",
]


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

    def apply(self, batch: Batch) -> Item:
        """Create the memory and record its first version."""
        uow = batch.uow
        memory = Memory.create(
            tenant_id=uow.caller.tenant_id,
            memory_type=self.memory_type,
            scope=self.scope,
            project=self.project,
            topic=self.topic,
            principal_id=uow.caller.principal_id,
            importance=self.importance,
        )
        version_id = _record_version(
            batch, memory, self.content, self.evidence, self.model_id, self.trust
        )
        uow.add(memory)
        return Item(
            memory.id,
            (memory.id, memory.version),
            {"id": str(memory.id), "version_id": str(version_id)},
        )


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

    def apply(self, batch: Batch) -> Item:
        """Record the version on the memory (found, or made earlier in the batch)."""
        memory = batch.uow.load(batch.resolve(self.memory_id), Memory, "memory")
        version_id = _record_version(
            batch, memory, self.content, self.evidence, self.model_id, self.trust
        )
        return Item(
            memory.id,
            (memory.id, memory.version),
            {"memory_id": str(memory.id), "version_id": str(version_id)},
        )


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
