"""``/v1/decisions``: what a decision did, and one decision explained."""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.projections.views.decision_records import DecisionRecord

__all__ = [
    "DecisionOutcome",
    "DecisionPublic",
]


class DecisionOutcome(BaseModel):
    """What a decision did. ``replayed`` is true when the same logical decision had
    already produced the current state: nothing was recorded, and this is its outcome."""

    id: UUID
    kind: str
    subject: str
    params: dict[str, str | list[str]]
    reason: str | None = Field(
        default=None, description="Why the caller asked, as recorded (null when not given)."
    )
    accepted: list[dict[str, str]]
    refused: list[dict[str, str]]
    replayed: bool
    position: int


class DecisionPublic(DecisionRecord):
    """A recorded decision, explained: what it was asked, what it saw, what it did."""
