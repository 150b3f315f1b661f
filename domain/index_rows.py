"""The memory and decision indexes' rows: what a write adds to ``memory_index`` and
``decision_index`` (created memories and decisions, erased memories)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from palimpsest.domain.decision import Decision
from palimpsest.domain.dependency import Row, Rule
from palimpsest.domain.memory import Memory

__all__ = [
    "ErasedMemory",
    "INDEX_RULES",
    "IndexedDecision",
    "IndexedMemory",
]


@dataclass(frozen=True, slots=True)
class IndexedMemory(Row):
    """A memory the write creates, as the memory index lists it."""

    memory_id: UUID
    memory_type: str
    scope: str
    project: str | None
    topic: str | None


@dataclass(frozen=True, slots=True)
class ErasedMemory(Row):
    """A memory the write erases."""

    memory_id: UUID


@dataclass(frozen=True, slots=True)
class IndexedDecision(Row):
    """A recorded decision (so replays are found, and a tenant deletion finds its
    erasure batches): its id, kind, logical key and the decision it is part of."""

    decision_id: UUID
    kind: str
    logical_key: str
    part_of: UUID | None


def _created(event: Memory.Created) -> tuple[Row, ...]:
    return (
        IndexedMemory(
            event.originator_id, event.memory_type, event.scope, event.project, event.topic
        ),
    )


def _erased(event: Memory.Erased) -> tuple[Row, ...]:
    return (ErasedMemory(event.originator_id),)


def _decided(event: Decision.Created) -> tuple[Row, ...]:
    part_of = event.params.get("part_of")
    within = UUID(str(part_of)) if part_of else None
    return (IndexedDecision(event.originator_id, event.kind, event.logical_key, within),)


INDEX_RULES = (
    Rule((Memory.Created,), _created),
    Rule((Memory.Erased,), _erased),
    Rule((Decision.Created,), _decided),
)
"""The rules that make this module's rows."""
