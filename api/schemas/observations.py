"""``/v1/observations``: capture raw reports and read them back."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from pydantic import AwareDatetime, BaseModel

from api.schemas.common import Label, MediaType, Reason, RequestBody
from projections.views.observations import Milestone, Milestones, ObservationRecord

__all__ = [
    "Milestone",
    "Milestones",
    "ObservationCreate",
    "ObservationCreated",
    "ObservationPublic",
    "RetractCreate",
]


class ObservationCreate(RequestBody):
    """A raw report to capture. Content is text, at most 1 MiB as UTF-8."""

    content: str
    media_type: MediaType = "text/plain"
    source: Label | None = None
    captured_at: AwareDatetime | None = None
    transient: bool = False


class ObservationCreated(BaseModel):
    """Where the observation landed in the log, and when its bytes expire."""

    id: UUID
    position: int
    retention_deadline: datetime


class ObservationPublic(ObservationRecord):
    """An observation's metadata (its content is at ``/content``)."""


class RetractCreate(RequestBody):
    """Retract an observation as evidence."""

    reason: Reason | None = None
