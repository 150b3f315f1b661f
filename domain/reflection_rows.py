"""The reflections read model's rows: recorded reflections (consolidation's second
pass) and their redactions (no memory depends on a reflection)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from palimpsest.domain.dependency import Row, Rule
from palimpsest.domain.reflection import Reflection

__all__ = ["REFLECTION_RULES", "RedactedReflection", "ReflectionRow"]


@dataclass(frozen=True, slots=True)
class ReflectionRow(Row):
    """A recorded reflection, as its read-model row holds it."""

    reflection_id: UUID
    scope: str
    project: str | None
    model: str
    content_digest: str
    source_ids: tuple[UUID, ...]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RedactedReflection(Row):
    """A reflection whose text the write erases (its bytes go unless held)."""

    reflection_id: UUID
    digest: str


def _reflection(event: Reflection.Event) -> tuple[Row, ...]:
    if isinstance(event, Reflection.Created):
        return (
            ReflectionRow(
                event.originator_id,
                event.scope,
                event.project,
                event.model,
                event.content_digest,
                tuple(UUID(s["memory_id"]) for s in event.sources),
                event.timestamp,
            ),
        )
    if isinstance(event, Reflection.Redacted):
        return (RedactedReflection(event.originator_id, event.content_digest),)
    return ()


REFLECTION_RULES = (Rule((Reflection.Event,), _reflection),)
"""The rules that make this module's rows."""
