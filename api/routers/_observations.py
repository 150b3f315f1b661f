"""``/v1/observations``: capture raw reports and read them back."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._deps import CallerDep, ClockDep, RuntimeDep, WriteDep
from palimpsest.api._specs import observation_spec, requires, retract_spec
from palimpsest.api.schemas import (
    DecisionOutcome,
    ObservationCreate,
    ObservationCreated,
    ObservationPublic,
    RetractCreate,
)
from palimpsest.api.schemas._common import Cursor
from palimpsest.api.schemas._observations import ObservationPagePublic
from palimpsest.projections.commands.writer import ObservationSpec, RetractSpec
from palimpsest.projections.views.observations import (
    ObservationRecord,
    list_observations,
    observation_content,
    observation_metadata,
)

__all__ = [
    "create_observation",
    "list_observations_page",
    "read_observation",
    "read_observation_content",
    "retract_observation",
    "router",
]

router = APIRouter(prefix="/v1/observations", tags=["observations"])


@router.post(
    "",
    status_code=201,
    response_model=ObservationCreated,
    dependencies=[Depends(requires(ObservationSpec))],
)
def create_observation(body: ObservationCreate, write: WriteDep) -> dict[str, Any]:
    """Capture an observation. Its bytes go to the payload store; its event keeps only
    the digest, size, media type, source, capture time and retention deadline (fixed now:
    30 days for raw observations, 24 hours when `transient`, by default)."""
    return write.perform(body, observation_spec(body))


@router.get("", response_model=ObservationPagePublic)
def list_observations_page(
    caller: CallerDep,
    runtime: RuntimeDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[Cursor | None, Query()] = None,
) -> ObservationPagePublic:
    """List the tenant's observations, newest first, with their metadata (expired and
    erased ones too, flagged; never content: it is at `/v1/observations/{id}/content`).
    Pass `next_cursor` back as `cursor` for the next page."""
    after = decode_cursor(cursor) if cursor else None
    items, after = list_observations(runtime.log, caller.tenant_id, limit=limit, after=after)
    return ObservationPagePublic(items=items, next_cursor=encode_cursor(after) if after else None)


@router.get("/{observation_id}", response_model=ObservationPublic)
def read_observation(
    observation_id: UUID, caller: CallerDep, runtime: RuntimeDep
) -> ObservationRecord:
    """Return an observation's metadata."""
    return observation_metadata(runtime.log, caller.tenant_id, observation_id)


@router.get(
    "/{observation_id}/content",
    response_class=Response,
    responses={
        200: {
            "description": "The bytes, with the media type the observation was captured "
            "with (`text/*` types with `charset=utf-8`).",
            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
def read_observation_content(
    observation_id: UUID, caller: CallerDep, runtime: RuntimeDep, clock: ClockDep
) -> Response:
    """Return an observation's bytes, with the media type it was captured with (anything
    but `text/plain` as an attachment; always under `Content-Security-Policy: sandbox`
    and `nosniff`, so a browser never runs stored content). From its
    retention deadline on, the bytes are refused with 410 (they are deleted by the expiry
    drain); the metadata, digest and the excerpts memory versions cite remain."""
    found = observation_content(runtime.log, caller.tenant_id, observation_id, now=clock())
    media_type = found.media_type
    if media_type.startswith("text/"):
        media_type += "; charset=utf-8"
    # Stored content is the caller's, not ours: a browser reaching the API must
    # never run it (stored HTML or SVG would be script on the API's origin).
    # Plain text is shown inline; anything else is a download, and sandboxed.
    headers = {"Content-Security-Policy": "default-src 'none'; sandbox"}
    if found.media_type != "text/plain":
        headers["Content-Disposition"] = f'attachment; filename="{observation_id}"'
    return Response(found.content, media_type=media_type, headers=headers)


@router.post(
    "/{observation_id}/retract",
    status_code=201,
    response_model=DecisionOutcome,
    responses={200: {"model": DecisionOutcome, "description": "Replayed: already retracted."}},
    dependencies=[Depends(requires(RetractSpec))],
)
def retract_observation(
    observation_id: UUID,
    write: WriteDep,
    body: RetractCreate | None = None,
) -> dict[str, Any]:
    """Retract an observation as evidence, by a recorded decision: every active
    contribution citing it is deactivated, the memories whose support changes are
    revised, and it can no longer be cited. Its content stays readable under its own
    retention (withdrawal is not erasure). Retracting it again replays the decision."""
    body = body or RetractCreate()
    return write.perform(body, retract_spec(observation_id, body))
