"""``/v1/proposals``: the forgetting pass's proposals, and a person's verdict on each."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import Reason, RequestBody
from palimpsest.projections.views.proposals import ProposalRecord, ProposedMemory

__all__ = [
    "ProposalApply",
    "ProposalPagePublic",
    "ProposalPublic",
    "ProposalReject",
    "ProposedMemoryPublic",
]


ProposedMemoryPublic = ProposedMemory
"""One memory of a proposal, as it is now."""


class ProposalPublic(ProposalRecord):
    """A proposal: the verdict, both memories side by side, and what became of it."""


class ProposalPagePublic(BaseModel):
    """A page of proposals, newest first."""

    items: list[ProposalPublic]
    next_cursor: str | None = Field(description="Pass back as `cursor`; null on the last page.")


class ProposalApply(RequestBody):
    """Apply a proposal. A conflict may be resolved at once: `archive_older` forgets the
    older memory, `supersede` adds a `supersedes` edge from the newer to the older."""

    reason: Reason | None = None
    resolution: Literal["archive_older", "supersede"] | None = Field(
        default=None,
        description="For a conflict proposal only; on any other kind the apply is refused "
        "(409 `resolution-not-applicable`).",
    )
    confirm_bulk: bool = Field(
        default=False,
        strict=True,
        description="An administrator's confirmation that this archival may pass the "
        "day's collapse guard (409 `collapse-guard` without it); what it archives still "
        "counts against the day's allowance.",
    )


class ProposalReject(RequestBody):
    """Reject a proposal; final for this memory and action until the memory's freshness
    moves. The reason is required."""

    reason: Reason
