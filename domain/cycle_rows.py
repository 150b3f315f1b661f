"""The decay cycles read model's rows: recorded cycles (with the memories they fade
and unfade) and what consolidating their survivors did."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from palimpsest.domain.cycle import Cycle
from palimpsest.domain.dependency import Row, Rule

__all__ = ["CYCLE_RULES", "ConsolidatedCycle", "CycleRow"]


@dataclass(frozen=True, slots=True)
class CycleRow(Row):
    """A recorded decay cycle, as its read-model rows hold it."""

    cycle_id: UUID
    snapshot_at: datetime
    policy_version: int
    report: dict[str, object]
    faded: tuple[UUID, ...]
    unfaded: tuple[UUID, ...]


@dataclass(frozen=True, slots=True)
class ConsolidatedCycle(Row):
    """A cycle whose consolidation the write records, with consolidation's summary."""

    cycle_id: UUID
    summary: dict[str, Any]


def _cycle_row(event: Cycle.Created) -> CycleRow:
    report: dict[str, object] = {
        "snapshot_at": event.snapshot_at.isoformat(),
        "policy_version": event.policy_version,
        "counts": event.counts,
        "by_type": event.by_type,
        "duplicates": event.duplicates,
        "faded": event.faded,
        "unfaded": event.unfaded,
        "proposals": event.proposals,
        "archived": event.archived,
    }
    # Absent from cycles recorded before the fields were: unknown, never a made-up 0.
    if event.held_back is not None:
        report["held_back"] = event.held_back
    if event.importance_fallbacks is not None:
        report["importance_fallbacks"] = event.importance_fallbacks
    return CycleRow(
        event.originator_id,
        event.snapshot_at,
        event.policy_version,
        report,
        tuple(UUID(i) for i in event.faded),
        tuple(UUID(i) for i in event.unfaded),
    )


def _cycle(event: Cycle.Event) -> tuple[Row, ...]:
    if isinstance(event, Cycle.Created):
        return (_cycle_row(event),)
    if isinstance(event, Cycle.Consolidated):
        return (ConsolidatedCycle(event.originator_id, dict(event.summary)),)
    return ()


CYCLE_RULES = (Rule((Cycle.Event,), _cycle),)
"""The rules that make this module's rows."""
