"""``/v1/memories/{id}/contributions``: add support to a version without rewriting it."""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import Label, RequestBody
from palimpsest.api.schemas._memories import EvidenceIn
from palimpsest.domain.limits import MAX_EVIDENCE_ITEMS

__all__ = [
    "ContributionAdded",
    "ContributionsCreate",
    "ContributionsCreated",
]


class ContributionsCreate(RequestBody):
    """Excerpts to record as the caller's support for a version (the current one
    unless ``version_id`` names another)."""

    version_id: UUID | None = Field(
        default=None, description="The version to support; the current one when absent."
    )
    evidence: list[EvidenceIn] = Field(min_length=1, max_length=MAX_EVIDENCE_ITEMS)
    model_id: Label | None = Field(default=None, description="The model that proposed it, if any.")
    trust: float = Field(default=1.0, ge=0.0, le=1.0, strict=True)


class ContributionAdded(BaseModel):
    """One new contribution: the excerpt it cites, by reference and digest."""

    id: UUID
    observation_id: UUID
    start: int
    end: int
    excerpt_digest: str


class ContributionsCreated(BaseModel):
    """The contributions added, the version they support, and the write's log position."""

    memory_id: UUID
    version_id: UUID
    contributions: list[ContributionAdded]
    position: int
