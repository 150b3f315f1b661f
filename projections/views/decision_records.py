"""Decision records: one decision as ``GET /v1/decisions/{id}`` explains it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from domain.decision import Decision
from projections.store.aggregates import event_positions, load_aggregate
from projections.store.eventlog import EventLog

__all__ = ["decision_record"]


def decision_record(log: EventLog, tenant_id: UUID, decision_id: UUID) -> dict[str, Any]:
    """Return one decision as ``GET /v1/decisions/{id}`` explains it.

    Raises:
        NotFoundError: the tenant has no such decision.
    """
    decision = load_aggregate(log, tenant_id, decision_id, Decision, "decision")
    position, recorded_at = event_positions(log, tenant_id, decision.id)[1]
    return {
        **decision.outcome(),
        "logical_key": decision.logical_key,
        "inputs": list(decision.inputs),
        "seen": list(decision.seen),
        "proposer_id": str(decision.proposer_id),
        "principal_id": str(decision.principal_id),
        "policy_version": decision.policy_version,
        "position": position,
        "recorded_at": recorded_at.isoformat(),
    }
