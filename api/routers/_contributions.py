"""``/v1/memories/{id}/contributions``: add support to a version without rewriting it."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends

from palimpsest.api._deps import WriteDep
from palimpsest.api._specs import contributions_spec, requires
from palimpsest.api.schemas import ContributionsCreate, ContributionsCreated
from palimpsest.projections.commands.contributions import ContributionSpec

__all__ = [
    "create_contributions",
    "router",
]

router = APIRouter(prefix="/v1/memories", tags=["memories"])


@router.post(
    "/{memory_id}/contributions",
    status_code=201,
    response_model=ContributionsCreated,
    dependencies=[Depends(requires(ContributionSpec))],
)
def create_contributions(
    memory_id: UUID, body: ContributionsCreate, write: WriteDep
) -> dict[str, Any]:
    """Add support to the memory's current version (or `version_id`), without writing
    its text again: one contribution per `evidence` excerpt, by the caller as proposer,
    each checked as a version's evidence is (the observation exists, is neither
    retracted nor erased, and the offsets fall inside its content). A proposer who
    already supports the version with an observation is refused (409) for it again.
    Withdrawing one proposer later deactivates only that proposer's contributions."""
    return write.perform(body, contributions_spec(memory_id, body))
