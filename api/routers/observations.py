"""``/v1/observations``: capture raw reports and read them back."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Response

from api.deps import CallerDep, ClockDep, RuntimeDep, WriteDep
from api.schemas import (
    DecisionOutcome,
    ObservationCreate,
    ObservationCreated,
    ObservationPublic,
    RetractCreate,
)
from api.specs import observation_spec, retract_spec
from projections.views.observations import (
    ObservationRecord,
    observation_content,
    observation_metadata,
)

__all__ = [
    "create_observation",
    "read_observation",
    "read_observation_content",
    "retract_observation",
    "router",
]

router = APIRouter(prefix="/v1/observations", tags=["observations"])


@router.post("", status_code=201, response_model=ObservationCreated)
def create_observation(body: ObservationCreate, write: WriteDep) -> dict[str, Any]:
    """Capture an observation. Its bytes go to the payload store; its event keeps only
    the digest, size, media type, source, capture time and retention deadline (fixed now:
    30 days for raw observations, 24 hours when `transient`, by default)."""
    return write.perform(body, observation_spec(body))


@router.get("/{observation_id}", response_model=ObservationPublic)
def read_observation(
    observation_id: UUID, caller: CallerDep, runtime: RuntimeDep
) -> ObservationRecord:
    """Return an observation's metadata."""
    return observation_metadata(runtime.log, caller.tenant_id, observation_id)


@router.get(
    "/{observation_id}/content",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}}},
)
def read_observation_content(
    observation_id: UUID, caller: CallerDep, runtime: RuntimeDep, clock: ClockDep
) -> Response:
    """Return an observation's bytes, with the media type it was captured with. From its
    retention deadline on, the bytes are refused with 410 (they are deleted by the expiry
    drain); the metadata, digest and the excerpts memory versions cite remain."""
    found = observation_content(runtime.log, caller.tenant_id, observation_id, now=clock())
    media_type = found.media_type
    if media_type.startswith("text/"):
        media_type += "; charset=utf-8"
    return Response(found.content, media_type=media_type)


@router.post(
    "/{observation_id}/retract",
    status_code=201,
    response_model=DecisionOutcome,
    responses={200: {"model": DecisionOutcome, "description": "Replayed: already retracted."}},
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
