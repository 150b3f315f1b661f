"""Consolidation's writes: proposing a merge, and folding memories into one.

A merge makes one new memory of the sources' kind (type, scope, project; the
centre's topic) whose one version has the merged text and cites the union
of every source's current excerpts, so no provenance is lost; it adds a
``derived_from`` and a ``supersedes`` edge from the new memory to each
source, so each source is structurally archived (retracting the edge
restores it). It is a decision (``merge``, or ``apply_proposal`` when a
person applies a ``merge`` proposal) recorded in the same write.

By default consolidation only *proposes* a merge (:class:`ProposeMergeSpec`):
the text is stored then, and a person applies it through the review queue
(:mod:`palimpsest.projections.commands.proposals`). :class:`MergeSpec` folds directly:
consolidation uses it only where the tenant's policy lets extractive merges
of near duplicates apply, and it spends the collapse guard's allowance by the
memories it folds (:mod:`palimpsest.projections.commands.collapse_guard`). A pinned
memory is never folded: a merge (proposed or direct) of one is refused as stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID, uuid4

from palimpsest.domain.consolidation import union_excerpts
from palimpsest.domain.decision import POLICY_VERSION
from palimpsest.domain.errors import ConflictError, InvalidInputError, StaleProposalError
from palimpsest.domain.limits import MAX_VERSION_BYTES, encode_content
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import Proposal
from palimpsest.domain.reflection import Reflection
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.collapse_guard import CollapseGuardSettings, claim_archivals
from palimpsest.projections.commands.decisions import (
    Operations,
    record_decision,
    seen_version,
    superseding_edges,
)
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "MergeSpec",
    "ProposeMergeSpec",
    "ReflectSpec",
    "derived_reflections",
    "merge_into",
    "open_merge_members",
    "redact_reflections",
    "stored_text",
]


def stored_text(uow: UnitOfWork, digest: str) -> bytes:
    """Return the payload stored under ``digest`` (a merge proposal's text).

    Raises:
        ConflictError: the bytes are gone (erased since the proposal).
    """
    held = uow.context.payloads.get(digest)
    if held is not None:
        return held
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT content FROM {schema}.payloads WHERE digest = %s", uow.log.datastore.schema
            ),
            (digest,),
        )
        row = cur.fetchone()
    if row is None:
        msg = f"the merged text {digest} is no longer stored"
        raise ConflictError(msg)
    return bytes(row["content"])


def open_merge_members(log: EventLog, tenant_id: UUID) -> set[UUID]:
    """Return every memory that an open ``merge`` proposal would fold (any source, not
    only its centre), so no memory is proposed into two merges at once."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT proposal_id FROM {schema}.retention_proposals"
                " WHERE action = 'merge' AND status = 'proposed'",
                log.datastore.schema,
            )
        )
        ids = [row["proposal_id"] for row in cur]
    members: set[UUID] = set()
    for proposal in aggregates_of(log, tenant_id, ids).values():
        if isinstance(proposal, Proposal):
            members.update(UUID(s["memory_id"]) for s in proposal.seen)
    return members


def _sources(uow: UnitOfWork, seen: list[tuple[UUID, UUID]], what: str) -> list[Memory]:
    """Load the sources, refusing if any changed since they were seen (another
    version, archived, erased) or is pinned (folding it would hide it), or is an
    ``event``."""
    if len(seen) < 2 or len({m for m, _ in seen}) != len(seen):
        msg = f"a {what} folds two or more distinct memories"
        raise InvalidInputError(msg)
    uow.preload([m for m, _ in seen])
    memories = []
    for memory_id, version_id in seen:
        memory = uow.load(memory_id, Memory, "memory")
        why = None
        if memory.erased_by is not None:
            why = "was erased"
        elif memory.archived is not None or superseding_edges(uow, memory):
            why = "was archived"
        elif memory.current_version.version_id != version_id:
            why = "has a newer version"
        elif memory.pinned:
            why = "was pinned"
        if why is not None:
            msg = f"the {what} is stale: memory {memory.id} {why} since it was proposed"
            raise StaleProposalError(msg)
        memories.append(memory)
    kinds = {(m.memory_type, m.scope, m.project) for m in memories}
    if len(kinds) != 1 or memories[0].memory_type == "event":
        msg = f"a {what} folds memories of one type, scope and project, never events"
        raise InvalidInputError(msg)
    return memories


def merge_into(
    uow: UnitOfWork,
    sources: list[Memory],
    data: bytes,
    *,
    model_id: str | None,
    decision_id: UUID,
) -> tuple[Memory, list[dict[str, str]]]:
    """Fold ``sources`` (the centre first) into a new memory with text ``data``; return
    it and the operations, for the decision that records them.

    The new version's contributions carry the least trust any source's active
    support has (a merge is no more trusted than its weakest source), 1.0 when
    none has any.
    """
    centre = sources[0]
    principal_id = uow.caller.principal_id
    merged = Memory.create(
        tenant_id=uow.caller.tenant_id,
        memory_type=centre.memory_type,
        scope=centre.scope,
        project=centre.project,
        topic=centre.topic,
        principal_id=principal_id,
    )
    trusts = [
        c.trust
        for m in sources
        for c in m.contributions
        if c.active and c.version_id == m.current_version.version_id
    ]
    version_id = merged.record_version(
        content_digest=uow.store_payload(data),
        size_bytes=len(data),
        excerpts=union_excerpts([m.current_version.excerpts for m in sources]),
        principal_id=principal_id,
        model_id=model_id,
        trust=min(trusts, default=1.0),
    )
    uow.add(merged)
    operations = [
        {"op": "create_memory", "memory_id": str(merged.id), "version_id": str(version_id)}
    ]
    for source in sources:
        for kind in ("derived_from", "supersedes"):
            edge_id = merged.add_edge(
                kind, source, principal_id=principal_id, decision_id=decision_id
            )
            operations.append(
                {
                    "op": "add_edge",
                    "edge_id": str(edge_id),
                    "memory_id": str(merged.id),
                    "kind": kind,
                    "target_id": str(source.id),
                }
            )
    return merged, operations


@dataclass(frozen=True)
class ProposeMergeSpec(WriteSpec):
    """Propose folding similar memories into one, with the merged text."""

    role = "writer"
    action = "propose merges"

    seen: tuple[tuple[UUID, UUID], ...]
    """(memory, version) of each source, the centre first."""
    content: str
    model: str
    """The summariser's model, or ``extractive``."""
    run_id: UUID
    similarity: float | None = None
    """The least similarity of a source to the centre (shown as the probability)."""

    def apply(self, batch: Batch) -> Item:
        """Record the merge proposal, its text in the payload store.

        Raises:
            NotFoundError: a source is unknown.
            StaleProposalError: a source changed since it was seen.
            ConflictError: a source already has an open merge proposal.
            InvalidInputError: fewer than two sources, of different kinds, or events;
                blank or oversized text.
        """
        uow = batch.uow
        sources = _sources(uow, list(self.seen), "merge")
        opened = open_merge_members(uow.log, uow.caller.tenant_id)
        if any(m.id in opened for m in sources):
            msg = "a source already has an open merge proposal"
            raise ConflictError(msg)
        data = encode_content(
            self.content, limit_bytes=MAX_VERSION_BYTES, what="merged text", allow_blank=False
        )
        proposal = Proposal.propose(
            id=uuid4(),
            tenant_id=uow.caller.tenant_id,
            memory_id=sources[0].id,
            action="merge",
            related_memory_id=None,
            probability=self.similarity,
            distribution=None,
            model=self.model,
            run_id=self.run_id,
            seen=[seen_version(m) for m in sources],
            policy_version=POLICY_VERSION,
            dismissed=False,
            content_digest=uow.store_payload(data),
        )
        uow.add(proposal)
        return Item(
            proposal.id,
            (proposal.id, proposal.version),
            {"id": str(proposal.id), "status": proposal.status},
        )


@dataclass(frozen=True)
class MergeSpec(WriteSpec):
    """Fold similar memories into one at once, as a ``merge`` decision."""

    role = "writer"
    action = "merge memories"

    seen: tuple[tuple[UUID, UUID], ...]
    """(memory, version) of each source, the centre first."""
    content: str
    model_id: str | None
    reason: str | None = None
    guard: CollapseGuardSettings = field(default_factory=CollapseGuardSettings)
    """The collapse guard the folded memories are claimed under."""

    def apply(self, batch: Batch) -> Item:
        """Create the consolidated memory and supersede the sources (see the module).

        Raises:
            NotFoundError, StaleProposalError, InvalidInputError: as
                :meth:`ProposeMergeSpec.apply`.
            CollapseGuardError: folding the sources would pass the day's allowance
                (raised when the write is recorded; nothing is).
        """
        uow = batch.uow
        sources = _sources(uow, list(self.seen), "merge")
        data = encode_content(
            self.content, limit_bytes=MAX_VERSION_BYTES, what="merged text", allow_blank=False
        )
        claim_archivals(batch, len(sources), self.guard)

        def take(decision_id: UUID) -> Operations:
            _, accepted = merge_into(
                uow, sources, data, model_id=self.model_id, decision_id=decision_id
            )
            return accepted, [], [seen_version(m) for m in sources]

        return record_decision(
            uow,
            kind="merge",
            subject=f"memory:{sources[0].id}",
            params={"sources": [str(m.id) for m in sources]},
            inputs=[{"kind": "memory", "id": str(m.id)} for m in sources],
            take=take,
            nothing_to_do=None,
            reason=self.reason,
        )


@dataclass(frozen=True)
class ReflectSpec(WriteSpec):
    """Record a model's insight over memories of one scope and project, kept apart."""

    role = "writer"
    action = "record reflections"

    seen: tuple[tuple[UUID, UUID], ...]
    """(memory, version) of each memory the model saw."""
    content: str
    model: str
    cycle_id: UUID

    def apply(self, batch: Batch) -> Item:
        """Record the reflection, its text in the payload store.

        Raises:
            NotFoundError: a source is unknown.
            StaleProposalError: a source changed since the model saw it.
            InvalidInputError: fewer than two sources, of different scopes or
                projects; blank or oversized text.
        """
        uow = batch.uow
        if len({m for m, _ in self.seen}) < 2:
            msg = "a reflection is drawn from two or more memories"
            raise InvalidInputError(msg)
        uow.preload([m for m, _ in self.seen])
        sources = []
        for memory_id, version_id in self.seen:
            memory = uow.load(memory_id, Memory, "memory")
            if memory.erased_by is not None or memory.current_version.version_id != version_id:
                msg = f"memory {memory.id} changed since the model read it"
                raise StaleProposalError(msg)
            sources.append(memory)
        if len({(m.scope, m.project) for m in sources}) != 1:
            msg = "a reflection is drawn from memories of one scope and project"
            raise InvalidInputError(msg)
        data = encode_content(
            self.content, limit_bytes=MAX_VERSION_BYTES, what="reflection", allow_blank=False
        )
        reflection = Reflection.record(
            tenant_id=uow.caller.tenant_id,
            scope=sources[0].scope,
            project=sources[0].project,
            content_digest=uow.store_payload(data),
            size_bytes=len(data),
            sources=[seen_version(m) for m in sources],
            model=self.model,
            cycle_id=self.cycle_id,
            principal_id=uow.caller.principal_id,
        )
        uow.add(reflection)
        return Item(reflection.id, (reflection.id, reflection.version), {"id": str(reflection.id)})


def derived_reflections(uow: UnitOfWork, memory_ids: list[UUID]) -> list[Reflection]:
    """Return the unredacted reflections drawn from any of ``memory_ids``, loaded into
    the unit of work (an erasure redacts those whose sources it erases)."""
    if not memory_ids:
        return []
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT reflection_id FROM {schema}.reflections"
                " WHERE source_ids && %s::uuid[] AND redacted_position IS NULL"
                " ORDER BY reflection_id",
                uow.log.datastore.schema,
            ),
            (memory_ids,),
        )
        ids = [row["reflection_id"] for row in cur]
    uow.preload(ids)
    return [uow.load(i, Reflection, "reflection") for i in ids]


def redact_reflections(
    uow: UnitOfWork, memories: list[Memory], accepted: list[dict[str, str]], decision_id: UUID
) -> list[dict[str, str]]:
    """Redact each reflection drawn from one of ``memories`` that lost a version's
    content in an erasure's ``accepted`` operations; return the redactions as
    operations (each with the digest of the text it removed)."""
    lost = {op["memory_id"] for op in accepted if op["op"] == "erase_version"}
    operations = []
    for reflection in derived_reflections(uow, [m.id for m in memories]):
        if lost & {str(m) for m in reflection.source_ids} and reflection.redact(
            decision_id=decision_id, principal_id=uow.caller.principal_id
        ):
            operations.append(
                {
                    "op": "redact_reflection",
                    "reflection_id": str(reflection.id),
                    "digest": reflection.content_digest,
                }
            )
    return operations
