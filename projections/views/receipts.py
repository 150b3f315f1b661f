"""Erasure receipts: what an erasure or a tenant deletion removed, and whether it is done."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Literal
from uuid import UUID

from pydantic import Field

from palimpsest.domain.decision import Decision
from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.store.aggregates import load_aggregate
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.decision_records import DecisionRecord, decision_record
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["Receipt", "RemovedCounts", "erasure_receipt"]


class RemovedCounts(Record):
    """How many of each kind of thing an erasure removed."""

    observations: int
    memories: int
    versions: int
    excerpts: int
    contributions_deactivated: int


class Receipt(Record):
    """What an erasure (or a tenant deletion) removed, by which decision, and whether
    it is complete. ``digests`` are the content digests of the removed bytes
    (observations, versions, excerpts); ``recomputed`` the memories whose beliefs were
    recomputed because they cited or linked erased content."""

    id: UUID
    kind: Literal["erasure", "tenant_deletion"]
    status: Literal["completed", "in_progress"]
    reason: str | None
    decision: DecisionRecord
    removed: RemovedCounts
    digests: list[str]
    recomputed: list[UUID]
    batches: int = Field(description="Erasure batches of a tenant deletion so far.")


def _parts(log: EventLog, tenant_id: UUID, decision_id: UUID) -> list[UUID]:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT decision_id FROM {schema}.decision_index"
                " WHERE part_of = %s ORDER BY position",
                log.datastore.schema,
            ),
            (decision_id,),
        )
        return [row["decision_id"] for row in cur]


def _deletion_completed(log: EventLog, tenant_id: UUID) -> bool:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT completed_position FROM {schema}.tenant_deletions", log.datastore.schema
            )
        )
        row = cur.fetchone()
        return row is not None and row["completed_position"] is not None


def _text(value: str | list[str] | None) -> str | None:
    """Return a text parameter as recorded (decisions before ``reason`` kept it there)."""
    return value if isinstance(value, str) else None


def erasure_receipt(log: EventLog, tenant_id: UUID, erasure_id: UUID) -> Receipt:
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
    status: Literal["completed", "in_progress"] = "completed"
    if decision.kind == "tenant_deletion":
        decisions += [
            load_aggregate(log, tenant_id, part, Decision, "erasure")
            for part in _parts(log, tenant_id, erasure_id)
        ]
        status = "completed" if _deletion_completed(log, tenant_id) else "in_progress"
    accepted = [op for d in decisions for op in d.accepted]
    counts = Counter(op["op"] for op in accepted if op["op"] != "recompute")
    erased_memories = {op["memory_id"] for op in accepted if op["op"] == "erase_memory"}
    recomputed = sorted(
        {op["memory_id"] for op in accepted if op["op"] == "recompute"} - erased_memories
    )
    return Receipt(
        id=decision.id,
        kind=decision.kind,
        status=status,
        reason=decision.reason or _text(decision.params.get("reason")),
        decision=record,
        removed=RemovedCounts(
            observations=counts["erase_observation"],
            memories=counts["erase_memory"],
            versions=counts["erase_version"],
            excerpts=counts["erase_excerpt"],
            contributions_deactivated=counts["deactivate_contribution"],
        ),
        digests=sorted({op["digest"] for op in accepted if "digest" in op}),
        recomputed=recomputed,
        batches=len(decisions) - 1,
    )
