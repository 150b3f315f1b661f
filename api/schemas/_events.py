"""``/v1/events``: the tenant's event feed."""

from __future__ import annotations

from pydantic import BaseModel

from palimpsest.projections.views.timeline import EventRecord

__all__ = [
    "EventPagePublic",
    "EventPublic",
]

EventPublic = EventRecord
"""One accepted event: its log position, time, type, aggregate and principal, and its
fields (references, digests and labels; never content)."""


class EventPagePublic(BaseModel):
    """A page of the tenant's event feed, and the position to continue after."""

    events: list[EventPublic]
    next_after: int
