"""``/v1/events``: the tenant's event feed, paged or as a Server-Sent Events stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Annotated
from uuid import UUID

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse

from palimpsest.api._admission import OVER_CAP, HolderDep, Slot
from palimpsest.api._deps import CallerDep, RuntimeDep
from palimpsest.api._waiting import jittered
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.schemas import EventPagePublic
from palimpsest.api.schemas._common import MAX_POSITION
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.publications import TenantWakers
from palimpsest.projections.views.timeline import event_feed

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = [
    "list_events",
    "router",
    "stream_events",
]

router = APIRouter(prefix="/v1/events", tags=["events"])

_BATCH = 100
_HEARTBEAT_S = 15.0
_RECHECK_S = 5.0
"""Longest time an idle stream goes without reading the feed. Writes of this
process and publications of any process wake it at once; this bounds how
late it sees what neither announces (an observation written by another
process). Each open stream costs one short query per recheck."""


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


@router.get("/stream", response_class=StreamingResponse, responses=OVER_CAP)
async def stream_events(
    request: Request,
    holder: HolderDep,
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
    connections alive.

    A token, and a tenant, may hold only so many streams open at once
    (`PALIMPSEST_STREAMS_PER_TOKEN`, `PALIMPSEST_STREAMS_PER_TENANT`); beyond that the
    answer is 429 `concurrency-limit` with `Retry-After`. Closing a stream frees its
    place at once."""
    start = last_event_id if last_event_id is not None else after
    slot = holder.hold("stream")  # refused here, before the 200 is sent
    writes: TenantWakers = request.app.state.writes
    return _FeedStream(_lines(runtime, writes, holder.tenant_id, start, limit), slot)


async def _lines(
    runtime: Runtime, writes: TenantWakers, tenant_id: UUID, start: int, limit: int | None
) -> AsyncGenerator[str, None]:
    """Yield the feed after ``start`` as SSE messages, reading it on a worker thread
    and, once caught up, awaiting a write or publication of the tenant (or a
    recheck, or the heartbeat) on the event loop, holding no thread."""
    loop = asyncio.get_running_loop()
    position, sent, quiet_since = start, 0, loop.time()
    with runtime.publications.subscribe(tenant_id) as woken, writes.attach(tenant_id, woken):
        yield ": palimpsest event feed\n\n"  # once subscribed: nothing after it is missed
        while limit is None or sent < limit:
            woken.clear()  # before the read: a write committed after it wakes the next wait
            batch = _BATCH if limit is None else min(_BATCH, limit - sent)
            events, position = await in_thread(
                event_feed, runtime.log, tenant_id, after=position, limit=batch
            )
            for event in events:
                data = json.dumps(event.model_dump(mode="json", by_alias=True))
                yield f"id: {event.position}\nevent: {event.type}\ndata: {data}\n\n"
            sent += len(events)
            if events:
                quiet_since = loop.time()
                if len(events) == batch:
                    continue  # more may be waiting: read on without a wake-up
            quiet_s = loop.time() - quiet_since
            if quiet_s >= _HEARTBEAT_S:
                yield ": keep-alive\n\n"
                quiet_since, quiet_s = loop.time(), 0.0
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    woken.wait(), min(_HEARTBEAT_S - quiet_s, jittered(_RECHECK_S))
                )


class _FeedStream(StreamingResponse):
    """An event stream that gives its slot back however it ends: the feed ran out
    (``limit``), the client went away (Starlette cancels the send), or it failed."""

    def __init__(self, lines: AsyncGenerator[str, None], slot: Slot) -> None:
        super().__init__(
            lines, media_type="text/event-stream", headers={"Cache-Control": "no-store"}
        )
        self._lines = lines
        self._slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._slot.release()
            # Cancelled while sending, the generator stays suspended at a yield,
            # still subscribed, until collected: close it now. Its cleanup
            # never awaits, so a pending cancellation cannot cut it short.
            await self._lines.aclose()
