"""Erasure receipts: what an erasure or a tenant deletion removed, and whether it is done."""

from __future__ import annotations

from collections import Counter
from typing import Any
from uuid import UUID

from domain.decision import Decision
from domain.errors import NotFoundError
from projections.store.aggregates import load_aggregate
from projections.store.eventlog import EventLog
from projections.store.tenancy import tenant_transaction
from projections.views.decision_records import decision_record

__all__ = ["erasure_receipt"]


def _parts(log: EventLog, tenant_id: UUID, decision_id: UUID) -> list[UUID]:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT decision_id FROM "{log.datastore.schema}".decision_index'
            " WHERE part_of = %s ORDER BY position",
            (decision_id,),
        )
        return [row["decision_id"] for row in cur]


def _deletion_state(log: EventLog, tenant_id: UUID) -> dict[str, Any] | None:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            "SELECT decision_id, requested_position, completed_position"
            f' FROM "{log.datastore.schema}".tenant_deletions'
        )
        row: dict[str, Any] | None = cur.fetchone()
        return row


def erasure_receipt(log: EventLog, tenant_id: UUID, erasure_id: UUID) -> dict[str, Any]:
    """Return the receipt of an erasure or a tenant deletion.

    It states the decision, what was removed (counts by kind, and the digests
    of the removed content: observation bytes, version contents, excerpts),
    the memories recomputed because they cited or linked erased content, and
    whether the work is complete. A tenant deletion sums the erasure batches
    the drain recorded for it.

    Raises:
        NotFoundError: the tenant has no erasure or deletion with that id.
    """
    decision = load_aggregate(log, tenant_id, erasure_id, Decision, "erasure")
    if decision.kind not in {"erasure", "tenant_deletion"}:
        msg = f"erasure {erasure_id} not found"
        raise NotFoundError(msg)
    record = decision_record(log, tenant_id, erasure_id)
    decisions = [decision]
    status = "completed"
    if decision.kind == "tenant_deletion":
        decisions += [
            load_aggregate(log, tenant_id, part, Decision, "erasure")
            for part in _parts(log, tenant_id, erasure_id)
        ]
        state = _deletion_state(log, tenant_id)
        status = "completed" if state and state["completed_position"] is not None else "in_progress"
    accepted = [op for d in decisions for op in d.accepted]
    counts = Counter(op["op"] for op in accepted if op["op"] != "recompute")
    erased_memories = {op["memory_id"] for op in accepted if op["op"] == "erase_memory"}
    recomputed = sorted(
        {op["memory_id"] for op in accepted if op["op"] == "recompute"} - erased_memories
    )
    return {
        "id": str(decision.id),
        "kind": decision.kind,
        "status": status,
        "reason": decision.params.get("reason"),
        "decision": record,
        "removed": {
            "observations": counts["erase_observation"],
            "memories": counts["erase_memory"],
            "versions": counts["erase_version"],
            "excerpts": counts["erase_excerpt"],
            "contributions_deactivated": counts["deactivate_contribution"],
        },
        "digests": sorted({op["digest"] for op in accepted if "digest" in op}),
        "recomputed": recomputed,
        "batches": len(decisions) - 1,
    }
