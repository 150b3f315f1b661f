"""Decision records: one decision as ``GET /v1/decisions/{id}`` explains it."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import Field

from palimpsest.domain.decision import Decision
from palimpsest.projections.store.aggregates import event_positions, load_aggregate
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["DecisionRecord", "decision_record"]


class DecisionRecord(Record):
    """A recorded decision, explained: what it was asked, what it saw, what it did."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str | list[str]]
    reason: str | None = Field(
        default=None,
        description="Why the caller asked (null when not given, or recorded before "
        "decisions kept their reason).",
    )
    logical_key: str
    inputs: list[dict[str, str]]
    seen: list[dict[str, str]]
    accepted: list[dict[str, str]]
    refused: list[dict[str, str]]
    proposer_id: UUID
    principal_id: UUID
    policy_version: str
    position: int
    recorded_at: datetime


def decision_record(log: EventLog, tenant_id: UUID, decision_id: UUID) -> DecisionRecord:
    """Return one decision as ``GET /v1/decisions/{id}`` explains it.

    Raises:
        NotFoundError: the tenant has no such decision.
    """
    decision = load_aggregate(log, tenant_id, decision_id, Decision, "decision")
    position, recorded_at = event_positions(log, tenant_id, decision.id)[1]
    return DecisionRecord(
        id=decision.id,
        kind=decision.kind,
        subject=decision.subject,
        params=decision.params,
        reason=decision.reason,
        logical_key=decision.logical_key,
        inputs=decision.inputs,
        seen=decision.seen,
        accepted=decision.accepted,
        refused=decision.refused,
        proposer_id=decision.proposer_id,
        principal_id=decision.principal_id,
        policy_version=decision.policy_version,
        position=position,
        recorded_at=recorded_at,
    )
