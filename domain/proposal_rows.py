"""The proposals read model's rows: recorded proposals (the forgetting pass's
verdicts), their decisions, and merge texts an erasure removes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from palimpsest.domain.dependency import Row, Rule
from palimpsest.domain.proposal import Proposal

__all__ = ["DecidedProposal", "ErasedMergeText", "PROPOSAL_RULES", "ProposalRow"]


@dataclass(frozen=True, slots=True)
class ProposalRow(Row):
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


@dataclass(frozen=True, slots=True)
class DecidedProposal(Row):
    """A proposal applied or rejected: by which decision, when, to what effect."""

    proposal_id: UUID
    status: str
    decision_id: UUID
    decided_at: datetime
    effect: str | None


@dataclass(frozen=True, slots=True)
class ErasedMergeText(Row):
    """A merge proposal whose text the write erases (its bytes go unless held)."""

    proposal_id: UUID
    digest: str


def _proposal(event: Proposal.Event) -> tuple[Row, ...]:
    if isinstance(event, Proposal.Created):
        return (
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
            ),
        )
    if isinstance(event, Proposal.TextErased):
        return (ErasedMergeText(event.originator_id, event.content_digest),)
    if isinstance(event, Proposal.Decided):
        return (
            DecidedProposal(
                event.originator_id, event.status, event.decision_id, event.timestamp, event.effect
            ),
        )
    return ()


PROPOSAL_RULES = (Rule((Proposal.Event,), _proposal),)
"""The rules that make this module's rows."""
