"""``/v1/observations``: capture raw reports and read them back."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import Label, MediaType, Reason, RequestBody, Rfc3339
from palimpsest.projections.views.observations import (
    Milestone,
    Milestones,
    ObservationRecord,
    ObservationSummary,
)

__all__ = [
    "Milestone",
    "Milestones",
    "ObservationCreate",
    "ObservationCreated",
    "ObservationListItem",
    "ObservationPagePublic",
    "ObservationPublic",
    "RetractCreate",
]


class ObservationCreate(RequestBody):
    """A raw report to capture. Content is text, at most 1 MiB as UTF-8; it is stored
    as bytes, so it may hold any character (U+0000 included)."""

    content: str = Field(min_length=1, description="The report's text, at most 1 MiB as UTF-8.")
    media_type: MediaType = "text/plain"
    source: Label | None = None
    captured_at: Rfc3339 | None = Field(
        default=None,
        description="When the report was made (default: when received); a time after "
        "it was received, beyond 5 minutes of clock skew, is refused (422 invalid-input).",
    )
    transient: bool = Field(default=False, strict=True)


class ObservationCreated(BaseModel):
    """Where the observation landed in the log, and when its bytes expire."""

    id: UUID
    position: int
    retention_deadline: datetime


class ObservationPublic(ObservationRecord):
    """An observation's metadata (its content is at ``/content``)."""


ObservationListItem = ObservationSummary
"""An observation in a listing: its metadata (milestones at ``GET /v1/observations/{id}``,
content at ``/content``)."""


class ObservationPagePublic(BaseModel):
    """A page of observations, newest first, and the cursor of the next page (null on
    the last)."""

    items: list[ObservationListItem]
    next_cursor: str | None = None


class RetractCreate(RequestBody):
    """Retract an observation as evidence."""

    reason: Reason | None = None
