"""``/v1/events``: the tenant's event feed, paged or as a Server-Sent Events stream."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Header, Query
from fastapi.responses import StreamingResponse

from api.deps import CallerDep, RuntimeDep
from api.schemas import EventPagePublic
from api.schemas.common import MAX_POSITION
from projections.views.timeline import event_feed

__all__ = [
    "list_events",
    "router",
    "stream_events",
]

router = APIRouter(prefix="/v1/events", tags=["events"])

_POLL_S = 0.25
_HEARTBEAT_S = 15.0


@router.get("", response_model=EventPagePublic)
def list_events(
    caller: CallerDep,
    runtime: RuntimeDep,
    after: Annotated[
        int, Query(ge=0, le=MAX_POSITION, description="Log position to start after")
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> EventPagePublic:
    """Return the tenant's accepted events after a log position, oldest first: what was
    accepted, by whom, against which inputs (references and digests, never content).
    Pass `next_after` back as `after` for the next page."""
    events, next_after = event_feed(runtime.log, caller.tenant_id, after=after, limit=limit)
    return EventPagePublic(events=events, next_after=next_after)


@router.get("/stream", response_class=StreamingResponse)
def stream_events(
    caller: CallerDep,
    runtime: RuntimeDep,
    after: Annotated[
        int, Query(ge=0, le=MAX_POSITION, description="Log position to start after")
    ] = 0,
    limit: Annotated[
        int | None, Query(ge=1, description="Close the stream after this many events")
    ] = None,
    last_event_id: Annotated[int | None, Header(ge=0, le=MAX_POSITION)] = None,
) -> StreamingResponse:
    """Stream the same feed as Server-Sent Events (`text/event-stream`): each event has
    `id` (its log position, so a reconnect with `Last-Event-ID` resumes after it),
    `event` (its type) and `data` (the feed entry as JSON). A comment line keeps idle
    connections alive."""
    start = last_event_id if last_event_id is not None else after

    def lines() -> Iterator[str]:
        position, sent, quiet_since = start, 0, time.monotonic()
        yield ": palimpsest event feed\n\n"
        while limit is None or sent < limit:
            batch = 100 if limit is None else min(100, limit - sent)
            events, position = event_feed(
                runtime.log, caller.tenant_id, after=position, limit=batch
            )
            for event in events:
                data = json.dumps(event.model_dump(mode="json", by_alias=True))
                yield f"id: {event.position}\nevent: {event.type}\ndata: {data}\n\n"
            sent += len(events)
            if events:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since >= _HEARTBEAT_S:
                yield ": keep-alive\n\n"
                quiet_since = time.monotonic()
            time.sleep(_POLL_S)

    return StreamingResponse(
        lines(), media_type="text/event-stream", headers={"Cache-Control": "no-store"}
    )
