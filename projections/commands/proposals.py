"""Proposals: recording a judge's verdicts, and a person applying or rejecting them.

A verdict is recorded as a :class:`~palimpsest.domain.proposal.Proposal` (by the
forgetting pass, or by an operator who is the judge); at most one proposal
per memory and action is open. A person then applies or rejects it, as a
decision (``apply_proposal`` / ``reject_proposal``) recorded with its reason
in the same write as its effect:

- archive: the memory is forgotten, with a reason that names the proposal;
- supersede: a ``supersedes`` edge from the newer memory to the older one
  (refused for ``event`` memories, and for memories no longer live);
- conflict: the review is recorded; ``resolution`` may apply one at once
  (``archive_older``: forget the older memory; ``supersede``: the edge);
- merge: a consolidated memory with the proposal's text supersedes every
  memory it saw (:func:`palimpsest.projections.commands.consolidation.merge_into`).

A proposal whose memories changed since the judge saw them (another
version, archived, erased) is refused as stale, and so is one whose effect
would archive a pinned memory (a pin is the strongest keep a person gives; a
conflict only reviewed archives nothing, so a pin does not stand in its
way); a rejection is final for the memory and action until the memory's
freshness moves (the pass's candidate rules read it).

Applying an archive, a supersede, a conflict's resolution or a merge spends
the collapse guard's allowance by the memories it archives, reserved in the
decision's own write (:mod:`palimpsest.projections.commands.collapse_guard`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID, uuid4

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from palimpsest.domain.decision import POLICY_VERSION
from palimpsest.domain.errors import (
    ConflictError,
    InvalidInputError,
    ProposalClosedError,
    StaleProposalError,
)
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import DEFAULT_THRESHOLDS, Proposal
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.collapse_guard import (
    CollapseGuardSettings,
    claim_archivals,
)
from palimpsest.projections.commands.consolidation import merge_into, stored_text
from palimpsest.projections.commands.decisions import (
    Operations,
    given_reason,
    record_decision,
    seen_version,
    superseding_edges,
)
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "Effect",
    "ProposalDecisionSpec",
    "ProposalSettings",
    "ProposeSpec",
    "Resolution",
    "ResolutionNotApplicableError",
    "decide_proposal",
    "open_proposal_ids",
]

Resolution = Literal["archive_older", "supersede"]


class ResolutionNotApplicableError(ConflictError):
    """Raised when a resolution is given for a proposal that is not a conflict (409
    ``resolution-not-applicable``): the body is well formed, the proposal's kind,
    which the body cannot know, refuses it."""


Effect = Literal["archive", "supersede", "merge"]


class ProposalSettings(CollapseGuardSettings):
    """How verdicts become proposals and how many may be applied.

    ``threshold_*`` (``PALIMPSEST_THRESHOLD_ARCHIVE`` …) is the least probability at
    which a verdict is shown to a person, per action; below it a verdict is recorded
    dismissed. The forgetting pass and an operator's verdicts are held to the same.
    The collapse guard's allowance (``collapse_share``, ``collapse_minimum``) is
    :class:`~palimpsest.projections.commands.collapse_guard.CollapseGuardSettings`'s.
    """

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    threshold_archive: float = Field(default=DEFAULT_THRESHOLDS["archive"], ge=0.0, le=1.0)
    threshold_supersede: float = Field(default=DEFAULT_THRESHOLDS["supersede"], ge=0.0, le=1.0)
    threshold_conflict: float = Field(default=DEFAULT_THRESHOLDS["conflict"], ge=0.0, le=1.0)

    def thresholds(self) -> dict[str, float]:
        """Return the thresholds by action."""
        return {
            "archive": self.threshold_archive,
            "supersede": self.threshold_supersede,
            "conflict": self.threshold_conflict,
        }


def open_proposal_ids(log: EventLog, tenant_id: UUID, action: str) -> set[UUID]:
    """Return the memories with an open proposal of ``action``."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT memory_id FROM {schema}.retention_proposals"
                " WHERE action = %s AND status = 'proposed'",
                log.datastore.schema,
            ),
            (action,),
        )
        return {row["memory_id"] for row in cur}


@dataclass(frozen=True)
class ProposeSpec(WriteSpec):
    """Record a verdict about a memory as a proposal (or a dismissed one)."""

    role = "writer"
    action = "record verdicts"

    memory_id: UUID
    verdict: str
    related_memory_id: UUID | None
    probability: float | None
    distribution: dict[str, float] | None
    model: str
    run_id: UUID
    dismissed: bool
    note: str | None = None
    seen: list[tuple[UUID, UUID | None, str | None]] | None = None
    """(memory, version, content digest) of what the judge saw; None: the memories'
    current versions (an operator judges what is there now)."""

    def apply(self, batch: Batch) -> Item:
        """Record the proposal, with the versions and digests the judge saw.

        Raises:
            NotFoundError: no such memory (or related memory).
            ConflictError: an open proposal of this action about the memory exists.
            InvalidInputError: see :meth:`palimpsest.domain.proposal.Proposal.propose`.
        """
        uow = batch.uow
        memory = uow.load(self.memory_id, Memory, "memory")
        seen = [seen_version(memory)]
        if self.related_memory_id is not None:
            seen.append(seen_version(uow.load(self.related_memory_id, Memory, "related memory")))
        if self.seen is not None:
            seen = [
                {"memory_id": str(m), "version_id": str(v), "content_digest": d or ""}
                for m, v, d in self.seen
            ]
        if not self.dismissed and memory.id in open_proposal_ids(
            uow.log, uow.caller.tenant_id, self.verdict
        ):
            msg = f"memory {memory.id} already has an open {self.verdict} proposal"
            raise ConflictError(msg)
        proposal = Proposal.propose(
            id=uuid4(),
            tenant_id=uow.caller.tenant_id,
            memory_id=memory.id,
            action=self.verdict,
            related_memory_id=self.related_memory_id,
            probability=self.probability,
            distribution=self.distribution,
            model=self.model,
            run_id=self.run_id,
            seen=seen,
            policy_version=POLICY_VERSION,
            dismissed=self.dismissed,
            note=self.note,
        )
        uow.add(proposal)
        return Item(
            proposal.id,
            (proposal.id, proposal.version),
            {"id": str(proposal.id), "status": proposal.status},
        )


@dataclass(frozen=True)
class ProposalDecisionSpec(WriteSpec):
    """Apply or reject an open proposal, as a decision with its reason."""

    role = "writer"
    action = "decide proposals"

    proposal_id: UUID
    verdict: Literal["apply", "reject"]
    reason: str | None
    resolution: Resolution | None = None
    confirm_bulk: bool = False
    """An administrator's confirmation that passes the collapse guard (what it archives
    still counts against the day's allowance)."""
    settings: ProposalSettings = field(default_factory=ProposalSettings)

    def apply(self, batch: Batch) -> Item:
        """Apply or reject the proposal (see the module's rules).

        Raises:
            NotFoundError: no such proposal.
            ProposalClosedError: it is not open.
            StaleProposalError: its memories changed since the judge saw them, or
                applying it would archive a pinned memory.
            InvalidInputError: a rejection without a reason; a resolution for a
                proposal that is not a conflict, or when rejecting.
            EdgeNotAllowedError: a supersede between ``event`` memories.
            CollapseGuardError: it would archive past the day's allowance,
                unconfirmed (raised when the write is recorded).
            PermissionDeniedError: a confirmation by a caller who is not an admin.
        """
        return decide_proposal(batch, self)


def _live(uow: UnitOfWork, proposal: Proposal) -> dict[UUID, Memory]:
    """Return the memories the judge saw, by id, refusing the proposal if any changed
    since (another version, archived, erased)."""
    memories = {}
    for seen in proposal.seen:
        memory = uow.load(UUID(seen["memory_id"]), Memory, "memory")
        why = None
        if memory.erased_by is not None:
            why = "was erased"
        elif memory.archived is not None or superseding_edges(uow, memory):
            why = "was archived"
        elif str(memory.current_version.version_id) != seen["version_id"]:
            why = "has a newer version"
        if why is not None:
            msg = f"proposal {proposal.id} is stale: memory {memory.id} {why} since the verdict"
            raise StaleProposalError(msg)
        memories[memory.id] = memory
    return memories


def _archived_by(
    proposal: Proposal, memories: dict[UUID, Memory], effect: Effect | None
) -> list[Memory]:
    """Return the memories applying the proposal archives (the older one of a
    supersede or a conflict's resolution; every source of a merge)."""
    if effect == "merge":
        return list(memories.values())
    if effect is not None:
        return [memories[proposal.memory_id]]
    return []


def _refuse_pinned(proposal: Proposal, archived: list[Memory]) -> None:
    """Refuse, as stale, a proposal that would archive a pinned memory: a person pinned
    it since the verdict (or the verdict ignored a pin), and their word stands."""
    for memory in archived:
        if memory.pinned:
            msg = f"proposal {proposal.id} is stale: memory {memory.id} is pinned"
            raise StaleProposalError(msg)


def decide_proposal(batch: Batch, spec: ProposalDecisionSpec) -> Item:
    """Apply or reject one proposal, with its effect, in one decision."""
    uow = batch.uow
    proposal = uow.load(spec.proposal_id, Proposal, "proposal")
    reason = given_reason(spec.reason)
    if spec.verdict == "reject" and reason is None:
        msg = "a rejection needs a reason"
        raise InvalidInputError(msg)
    if spec.resolution is not None and spec.verdict != "apply":
        msg = "a resolution applies only to a proposal being applied"
        raise InvalidInputError(msg)
    if spec.resolution is not None and proposal.action != "conflict":
        msg = (
            f"proposal {proposal.id} is a {proposal.action} proposal: a resolution "
            f"({spec.resolution}) applies only to a conflict; apply it without one"
        )
        raise ResolutionNotApplicableError(msg)
    if proposal.status != "proposed":
        msg = f"proposal {proposal.id} is {proposal.status}, not open"
        raise ProposalClosedError(msg)
    memories = _live(uow, proposal) if spec.verdict == "apply" else {}
    effect = _effect(proposal, spec)
    archived = _archived_by(proposal, memories, effect)
    _refuse_pinned(proposal, archived)
    if spec.confirm_bulk:
        uow.caller.require("admin", "confirm a bulk archival")
    # Reserved in this decision's write: checked against what every other write that
    # archives committed, never against a count read before it.
    claim_archivals(batch, len(archived), spec.settings, confirmed=spec.confirm_bulk)
    principal_id = uow.caller.principal_id

    def take(decision_id: UUID) -> Operations:
        accepted: list[dict[str, str]] = []
        if spec.verdict == "apply":
            accepted = (
                _merge(uow, proposal, memories, decision_id)
                if effect == "merge"
                else _apply(proposal, memories, effect, reason, decision_id, principal_id)
            )
        status: Literal["applied", "rejected"] = (
            "applied" if spec.verdict == "apply" else "rejected"
        )
        proposal.decide(status, decision_id=decision_id, principal_id=principal_id, effect=effect)
        accepted.insert(0, {"op": f"{spec.verdict}_proposal", "proposal_id": str(proposal.id)})
        return accepted, [], [seen_version(m) for m in memories.values()]

    return record_decision(
        uow,
        kind=f"{spec.verdict}_proposal",
        subject=f"proposal:{proposal.id}",
        params={"resolution": spec.resolution} if spec.resolution else {},
        inputs=[{"kind": "proposal", "id": str(proposal.id)}],
        take=take,
        nothing_to_do=None,
        reason=reason,
    )


def _effect(proposal: Proposal, spec: ProposalDecisionSpec) -> Effect | None:
    """Return what applying ``spec`` does to a memory (None for a rejection, or a
    conflict only reviewed)."""
    if spec.verdict != "apply":
        return None
    if proposal.action in ("archive", "decay") or spec.resolution == "archive_older":
        return "archive"
    if proposal.action == "supersede" or spec.resolution == "supersede":
        return "supersede"
    if proposal.action == "merge":
        return "merge"
    return None


def _merge(
    uow: UnitOfWork, proposal: Proposal, memories: dict[UUID, Memory], decision_id: UUID
) -> list[dict[str, str]]:
    """Fold the memories a merge proposal saw (its centre first) into one."""
    assert proposal.content_digest is not None  # a merge proposal carries its text
    sources = [memories[UUID(seen["memory_id"])] for seen in proposal.seen]
    model_id = None if proposal.model == "extractive" else proposal.model
    _, operations = merge_into(
        uow,
        sources,
        stored_text(uow, proposal.content_digest),
        model_id=model_id,
        decision_id=decision_id,
    )
    return operations


def _apply(
    proposal: Proposal,
    memories: dict[UUID, Memory],
    effect: Effect | None,
    reason: str | None,
    decision_id: UUID,
    principal_id: UUID,
) -> list[dict[str, str]]:
    """Make the proposal's change to its memories; return the operations."""
    memory = memories[proposal.memory_id]
    if effect == "archive":
        why = f"proposal {proposal.id}" + (f": {reason}" if reason else "")
        memory.forget(why, decision_id=decision_id, principal_id=principal_id)
        return [{"op": "forget", "memory_id": str(memory.id)}]
    if effect == "supersede":
        assert proposal.related_memory_id is not None  # a supersede or conflict relates one
        newer = memories[proposal.related_memory_id]
        edge_id = newer.add_edge(
            "supersedes", memory, principal_id=principal_id, decision_id=decision_id
        )
        return [
            {
                "op": "add_edge",
                "edge_id": str(edge_id),
                "memory_id": str(newer.id),
                "kind": "supersedes",
                "target_id": str(memory.id),
            }
        ]
    return []
