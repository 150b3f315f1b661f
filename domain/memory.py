"""The ``Memory`` aggregate: a focused claim, its versions, support and edges."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args
from uuid import UUID, uuid4

from eventsourcing.domain import Aggregate, event

from palimpsest.domain.belief import ArchiveFact, ContributionFact
from palimpsest.domain.edge import check_edge
from palimpsest.domain.errors import (
    ConflictError,
    EdgeExistsError,
    InvalidInputError,
    NotFoundError,
)
from palimpsest.domain.evidence import Excerpt

__all__ = [
    "MEMORY_TYPES",
    "Memory",
    "MemoryType",
    "VersionRecord",
]

MemoryType = Literal["fact", "preference", "decision", "blocker", "event", "note"]
MEMORY_TYPES: tuple[MemoryType, ...] = get_args(MemoryType)


@dataclass(frozen=True)
class VersionRecord:
    """One immutable content revision, as the aggregate remembers it."""

    version_id: UUID
    content_digest: str
    size_bytes: int
    excerpts: tuple[Excerpt, ...]
    principal_id: UUID
    position_in_memory: int
    erased_by: UUID | None = None
    """The erasure decision that removed this version's content, if one did."""


class Memory(Aggregate):
    """A typed claim with scope and project; content lives in the payload store."""

    TOPIC = "palimpsest:Memory"

    erased_by: UUID | None = None
    """The erasure decision that erased the memory (``MemoryErased``: asked for, or
    its last live version went). A class default, so older snapshots still load."""
    importance: float | None = None
    """The importance given on write (a class default, so older snapshots load)."""
    retracted_edges: Sequence[UUID] = ()
    """Edges from or to this memory that a decision retracted (``EdgeRetracted``),
    oldest first. A class default, so older snapshots still load."""

    class Created(Aggregate.Created):
        """A memory was created (``MemoryCreated``); its first version follows."""

        TOPIC = "palimpsest:MemoryCreated"
        tenant_id: UUID
        memory_type: str
        scope: str
        project: str | None
        topic: str | None
        principal_id: UUID
        importance: float | None = None
        """How much the memory matters (0 to 1) as its writer said; None when not
        given (events older than the field decode as None)."""

    class VersionRecorded(Aggregate.Event):
        """A content revision was recorded, formed from cited excerpts."""

        TOPIC = "palimpsest:VersionRecorded"
        version_id: UUID
        content_digest: str
        size_bytes: int
        excerpts: list[dict[str, Any]]
        principal_id: UUID

    class ContributionAdded(Aggregate.Event):
        """An excerpt was recorded as support for a version, by a proposer."""

        TOPIC = "palimpsest:ContributionAdded"
        contribution_id: UUID
        version_id: UUID
        excerpt: dict[str, Any]
        proposer_id: UUID
        model_id: str | None
        trust: float
        principal_id: UUID

    class ContributionDeactivated(Aggregate.Event):
        """A contribution stopped counting as support, by a recorded decision
        (evidence retracted, proposer or model withdrawn). The text stays."""

        TOPIC = "palimpsest:ContributionDeactivated"
        contribution_id: UUID
        decision_id: UUID
        principal_id: UUID

    class EdgeAdded(Aggregate.Event):
        """An edge from this memory to another was recorded."""

        TOPIC = "palimpsest:EdgeAdded"
        edge_id: UUID
        kind: str
        target_id: UUID
        principal_id: UUID
        decision_id: UUID | None = None
        """The operator's decision that added it (None only in stores older than decisions)."""

    class EdgeRetracted(Aggregate.Event):
        """An edge stopped counting (``EdgeRetracted``), by a decision: recorded on
        both of its memories, so each one's projection sees it without the other."""

        TOPIC = "palimpsest:EdgeRetracted"
        edge_id: UUID
        decision_id: UUID
        principal_id: UUID

    class Archived(Aggregate.Event):
        """The memory was forgotten (``MemoryArchived``): hidden from ordinary reads,
        reversibly, by a decision. Not evidence that it is false."""

        TOPIC = "palimpsest:MemoryArchived"
        reason: str
        decision_id: UUID
        principal_id: UUID

    class Restored(Aggregate.Event):
        """A forget was reversed (``MemoryRestored``) by a decision."""

        TOPIC = "palimpsest:MemoryRestored"
        decision_id: UUID
        principal_id: UUID

    class VersionErased(Aggregate.Event):
        """A version's content was erased (``MemoryVersionErased``) by an erasure
        decision: it was formed only from erased observations, or the memory itself
        was erased. ``release_digest`` says no other live version of this memory
        keeps the same content, so the payload store may drop it."""

        TOPIC = "palimpsest:MemoryVersionErased"
        version_id: UUID
        content_digest: str
        release_digest: bool
        decision_id: UUID
        principal_id: UUID

    class Erased(Aggregate.Event):
        """The memory was erased (``MemoryErased``): every version's content is gone
        and every read answers with a placeholder naming the decision. Not undoable."""

        TOPIC = "palimpsest:MemoryErased"
        decision_id: UUID
        principal_id: UUID

    class Pinned(Aggregate.Event):
        """The memory was pinned (``MemoryPinned``): it ranks first until unpinned."""

        TOPIC = "palimpsest:MemoryPinned"
        decision_id: UUID
        principal_id: UUID

    class Unpinned(Aggregate.Event):
        """A pin was removed (``MemoryUnpinned``)."""

        TOPIC = "palimpsest:MemoryUnpinned"
        decision_id: UUID
        principal_id: UUID

    @event(Created)
    def __init__(
        self,
        tenant_id: UUID,
        memory_type: str,
        scope: str,
        project: str | None,
        topic: str | None,
        principal_id: UUID,
        importance: float | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.importance = importance
        self.memory_type = memory_type
        self.scope = scope
        self.project = project
        self.topic = topic
        self.principal_id = principal_id
        self.versions: list[VersionRecord] = []
        self.edges: dict[str, UUID] = {}
        """Edge ids by ``"<kind>:<target id>"`` (string keys keep snapshots plain JSON)."""
        self.contributions: list[ContributionFact] = []
        self.archived: ArchiveFact | None = None
        self.pinned = False

    @classmethod
    def create(
        cls,
        *,
        tenant_id: UUID,
        memory_type: str,
        scope: str,
        project: str | None,
        topic: str | None,
        principal_id: UUID,
        importance: float | None = None,
    ) -> Memory:
        """Create a memory after checking its type and its importance, if given.

        Raises:
            InvalidInputError: the type is not one of :data:`MEMORY_TYPES`, or the
                importance is outside [0, 1].
        """
        if memory_type not in MEMORY_TYPES:
            msg = f"unknown memory type {memory_type!r}; expected one of {', '.join(MEMORY_TYPES)}"
            raise InvalidInputError(msg)
        if importance is not None and not 0.0 <= importance <= 1.0:
            msg = f"importance must be between 0 and 1, got {importance}"
            raise InvalidInputError(msg)
        return cls(
            tenant_id=tenant_id,
            memory_type=memory_type,
            scope=scope,
            project=project,
            topic=topic,
            principal_id=principal_id,
            importance=importance,
        )

    def record_version(
        self,
        *,
        content_digest: str,
        size_bytes: int,
        excerpts: tuple[Excerpt, ...],
        principal_id: UUID,
        model_id: str | None,
        trust: float,
    ) -> UUID:
        """Record a new version and one contribution per cited excerpt.

        The caller is the proposer of every contribution it adds here.

        Returns:
            The new version's id.

        Raises:
            InvalidInputError: ``trust`` is outside ``[0, 1]``.
            ConflictError: the memory was erased.
        """
        if self.erased_by is not None:
            msg = f"memory {self.id} was erased (decision {self.erased_by}) and takes no versions"
            raise ConflictError(msg)
        if not 0.0 <= trust <= 1.0:
            msg = f"trust must be between 0 and 1, got {trust}"
            raise InvalidInputError(msg)
        version_id = uuid4()
        self._version_recorded(
            version_id=version_id,
            content_digest=content_digest,
            size_bytes=size_bytes,
            excerpts=[e.as_event_value() for e in excerpts],
            principal_id=principal_id,
        )
        for excerpt in excerpts:
            self._contribution_added(
                contribution_id=uuid4(),
                version_id=version_id,
                excerpt=excerpt.as_event_value(),
                proposer_id=principal_id,
                model_id=model_id,
                trust=trust,
                principal_id=principal_id,
            )
        return version_id

    @event(VersionRecorded)
    def _version_recorded(
        self,
        version_id: UUID,
        content_digest: str,
        size_bytes: int,
        excerpts: list[dict[str, Any]],
        principal_id: UUID,
    ) -> None:
        self.versions.append(
            VersionRecord(
                version_id=version_id,
                content_digest=content_digest,
                size_bytes=size_bytes,
                excerpts=tuple(Excerpt.from_event_value(e) for e in excerpts),
                principal_id=principal_id,
                position_in_memory=len(self.versions) + 1,
            )
        )

    @event(ContributionAdded)
    def _contribution_added(
        self,
        contribution_id: UUID,
        version_id: UUID,
        excerpt: dict[str, Any],
        proposer_id: UUID,
        model_id: str | None,
        trust: float,
        principal_id: UUID,
    ) -> None:
        self.contributions.append(
            ContributionFact(
                contribution_id=contribution_id,
                version_id=version_id,
                observation_id=UUID(str(excerpt["observation_id"])),
                proposer_id=proposer_id,
                model_id=model_id,
                trust=trust,
            )
        )

    def add_contributions(
        self,
        version_id: UUID,
        excerpts: tuple[Excerpt, ...],
        *,
        principal_id: UUID,
        model_id: str | None,
        trust: float,
    ) -> list[UUID]:
        """Record support for an existing version: one contribution per excerpt, by the
        caller as proposer.

        Returns:
            The new contributions' ids, in the order of ``excerpts``.

        Raises:
            InvalidInputError: no excerpts, or ``trust`` outside ``[0, 1]``.
            NotFoundError: the memory has no such version.
            ConflictError: the memory or the version was erased, or the caller
                already supports the version with an active contribution citing
                the same observation (another excerpt of one source adds nothing:
                support counts each observation once).
        """
        if self.erased_by is not None:
            msg = f"memory {self.id} was erased (decision {self.erased_by}) and takes no support"
            raise ConflictError(msg)
        if not excerpts:
            msg = "a contribution cites at least one excerpt"
            raise InvalidInputError(msg)
        if not 0.0 <= trust <= 1.0:
            msg = f"trust must be between 0 and 1, got {trust}"
            raise InvalidInputError(msg)
        record = next((v for v in self.versions if v.version_id == version_id), None)
        if record is None:
            msg = f"memory {self.id} has no version {version_id}"
            raise NotFoundError(msg)
        if record.erased_by is not None:
            msg = f"version {version_id} was erased (decision {record.erased_by})"
            raise ConflictError(msg)
        held = {
            c.observation_id
            for c in self.contributions
            if c.version_id == version_id and c.active and c.proposer_id == principal_id
        }
        for excerpt in excerpts:
            if excerpt.observation_id in held:
                msg = (
                    f"you already support version {version_id} with observation "
                    f"{excerpt.observation_id}"
                )
                raise ConflictError(msg)
        added = []
        for excerpt in excerpts:
            contribution_id = uuid4()
            self._contribution_added(
                contribution_id=contribution_id,
                version_id=version_id,
                excerpt=excerpt.as_event_value(),
                proposer_id=principal_id,
                model_id=model_id,
                trust=trust,
                principal_id=principal_id,
            )
            added.append(contribution_id)
        return added

    def deactivate_contribution(
        self, contribution_id: UUID, *, decision_id: UUID, principal_id: UUID
    ) -> None:
        """Deactivate an active contribution.

        Raises:
            NotFoundError: the memory has no such contribution.
            ConflictError: the contribution is already inactive.
        """
        for contribution in self.contributions:
            if contribution.contribution_id == contribution_id:
                if not contribution.active:
                    msg = f"contribution {contribution_id} is already inactive"
                    raise ConflictError(msg)
                self._contribution_deactivated(
                    contribution_id=contribution_id,
                    decision_id=decision_id,
                    principal_id=principal_id,
                )
                return
        msg = f"memory {self.id} has no contribution {contribution_id}"
        raise NotFoundError(msg)

    @event(ContributionDeactivated)
    def _contribution_deactivated(
        self, contribution_id: UUID, decision_id: UUID, principal_id: UUID
    ) -> None:
        self.contributions = [
            replace(c, active=False, deactivated_by=decision_id)
            if c.contribution_id == contribution_id
            else c
            for c in self.contributions
        ]

    def add_edge(
        self, kind: str, target: Memory, *, principal_id: UUID, decision_id: UUID | None = None
    ) -> UUID:
        """Record an edge from this memory to ``target``, under ``decision_id``.

        Returns:
            The new edge's id.

        Raises:
            EdgeNotAllowedError: see :func:`palimpsest.domain.edge.check_edge`.
            EdgeExistsError: the same kind of edge to ``target`` already exists.
        """
        check_edge(
            kind,
            source_type=self.memory_type,
            target_type=target.memory_type,
            same_memory=target.id == self.id,
        )
        if self.has_edge(kind, target.id):
            msg = f"memory {self.id} already has a {kind!r} edge to {target.id}"
            raise EdgeExistsError(msg)
        edge_id = uuid4()
        self._edge_added(
            edge_id=edge_id,
            kind=kind,
            target_id=target.id,
            principal_id=principal_id,
            decision_id=decision_id,
        )
        return edge_id

    @event(EdgeAdded)
    def _edge_added(
        self,
        edge_id: UUID,
        kind: str,
        target_id: UUID,
        principal_id: UUID,
        decision_id: UUID | None = None,
    ) -> None:
        self.edges[f"{kind}:{target_id}"] = edge_id

    def edge(self, edge_id: UUID) -> tuple[str, UUID] | None:
        """Return the kind and target of a live edge from this memory, if it has it."""
        for key, value in self.edges.items():
            if value == edge_id:
                kind, target = key.split(":", 1)
                return kind, UUID(target)
        return None

    def retract_edge(self, edge_id: UUID, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Record that an edge from or to this memory is retracted. Returns False (and
        records nothing) if it was retracted already; the source memory forgets it, so
        the same kind of edge to the same target may be added again (a new edge)."""
        if edge_id in self.retracted_edges:
            return False
        self._edge_retracted(edge_id=edge_id, decision_id=decision_id, principal_id=principal_id)
        return True

    @event(EdgeRetracted)
    def _edge_retracted(self, edge_id: UUID, decision_id: UUID, principal_id: UUID) -> None:
        self.edges = {k: v for k, v in self.edges.items() if v != edge_id}
        self.retracted_edges = [*self.retracted_edges, edge_id]

    def has_edge(self, kind: str, target_id: UUID) -> bool:
        """Return whether this memory has a ``kind`` edge to ``target_id``."""
        return f"{kind}:{target_id}" in self.edges

    def forget(self, reason: str, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Archive the memory reversibly. Returns False (and records nothing) if it
        is already archived.

        Raises:
            InvalidInputError: ``reason`` is blank.
        """
        if not reason.strip():
            msg = "a forget needs a reason"
            raise InvalidInputError(msg)
        if self.archived is not None:
            return False
        self._archived(reason=reason, decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Archived)
    def _archived(self, reason: str, decision_id: UUID, principal_id: UUID) -> None:
        self.archived = ArchiveFact(reason=reason, decision_id=decision_id)

    def restore(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Reverse a forget. Returns False (and records nothing) if not forgotten."""
        if self.archived is None:
            return False
        self._restored(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Restored)
    def _restored(self, decision_id: UUID, principal_id: UUID) -> None:
        self.archived = None

    def pin(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Pin the memory. Returns False (and records nothing) if already pinned."""
        if self.pinned:
            return False
        self._pinned(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Pinned)
    def _pinned(self, decision_id: UUID, principal_id: UUID) -> None:
        self.pinned = True

    def unpin(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Remove a pin. Returns False (and records nothing) if not pinned."""
        if not self.pinned:
            return False
        self._unpinned(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Unpinned)
    def _unpinned(self, decision_id: UUID, principal_id: UUID) -> None:
        self.pinned = False

    def erase_versions(
        self, version_ids: Iterable[UUID], *, decision_id: UUID, principal_id: UUID
    ) -> list[VersionRecord]:
        """Erase the content of the given versions (those not erased already); once
        no live version is left, the memory itself is erased by the same decision.

        Returns:
            The versions erased now, as they were before.
        """
        wanted = set(version_ids)
        erased: list[VersionRecord] = []
        for record in self.versions:
            if record.version_id not in wanted or record.erased_by is not None:
                continue
            kept = any(
                v.content_digest == record.content_digest
                and v.erased_by is None
                and v.version_id not in wanted
                for v in self.versions
            )
            self._version_erased(
                version_id=record.version_id,
                content_digest=record.content_digest,
                release_digest=not kept,
                decision_id=decision_id,
                principal_id=principal_id,
            )
            erased.append(record)
        if erased and not self.live_versions:
            self._erased(decision_id=decision_id, principal_id=principal_id)
        return erased

    @event(VersionErased)
    def _version_erased(
        self,
        version_id: UUID,
        content_digest: str,
        release_digest: bool,
        decision_id: UUID,
        principal_id: UUID,
    ) -> None:
        self.versions = [
            replace(v, erased_by=decision_id) if v.version_id == version_id else v
            for v in self.versions
        ]

    def erase(self, *, decision_id: UUID, principal_id: UUID) -> list[VersionRecord]:
        """Erase the whole memory: every live version, then the memory itself.

        Returns:
            The versions erased now (empty if the memory was erased already).
        """
        if self.erased_by is not None:
            return []
        return self.erase_versions(
            [v.version_id for v in self.versions],
            decision_id=decision_id,
            principal_id=principal_id,
        )

    @event(Erased)
    def _erased(self, decision_id: UUID, principal_id: UUID) -> None:
        self.erased_by = decision_id

    @property
    def live_versions(self) -> list[VersionRecord]:
        """Return the versions whose content is not erased, oldest first."""
        return [v for v in self.versions if v.erased_by is None]

    @property
    def current_version(self) -> VersionRecord:
        """Return the newest version whose content is not erased, or the newest
        version if all are (every memory is created with one)."""
        live = self.live_versions
        return live[-1] if live else self.versions[-1]
