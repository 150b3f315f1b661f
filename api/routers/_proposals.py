"""``/v1/proposals``: review the forgetting pass's proposals, and apply or reject them."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query

from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._deps import CallerDep, RuntimeDep, WriteDep
from palimpsest.api._specs import requires
from palimpsest.api.schemas import (
    DecisionOutcome,
    ProposalApply,
    ProposalPagePublic,
    ProposalPublic,
    ProposalReject,
)
from palimpsest.api.schemas._common import Cursor
from palimpsest.domain.memory import MemoryType
from palimpsest.projections.commands.proposals import ProposalDecisionSpec
from palimpsest.projections.views.proposals import (
    ProposalFilter,
    ProposalRecord,
    list_proposals,
    proposal_record,
)

__all__ = [
    "apply_proposal",
    "list_proposals_page",
    "read_proposal",
    "reject_proposal",
    "router",
]

router = APIRouter(prefix="/v1/proposals", tags=["proposals"])

_DECIDED: dict[int | str, dict[str, Any]] = {
    409: {
        "description": "`proposal-closed` (not open), `stale-proposal` (a memory changed "
        "since the verdict: another version, archived or erased; or applying it would "
        "archive a pinned memory), or `collapse-guard`."
    }
}
_APPLIED: dict[int | str, dict[str, Any]] = {
    409: {
        "description": _DECIDED[409]["description"].removesuffix(".")
        + ", or `resolution-not-applicable` (a `resolution` for a proposal that is not a "
        "conflict: the body is valid, the proposal's kind refuses it)."
    }
}


@router.get("", response_model=ProposalPagePublic, response_model_by_alias=True)
def list_proposals_page(
    caller: CallerDep,
    runtime: RuntimeDep,
    status: Literal["proposed", "applied", "rejected", "dismissed"] = "proposed",
    action: Literal["keep", "archive", "supersede", "conflict", "merge", "decay"] | None = None,
    memory_type: Annotated[MemoryType | None, Query(alias="type")] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: Cursor | None = None,
) -> ProposalPagePublic:
    """List proposals, newest first: open ones (`proposed`) unless `status` says
    otherwise (`dismissed` ones, keep verdicts and verdicts below their threshold, are
    listed only when asked for). Each carries both memories' current text side by
    side, the verdict, its probability and distribution, the model, and whether either
    memory changed since the verdict."""
    after = None if cursor is None else decode_cursor(cursor)
    where = ProposalFilter(status=status, action=action, memory_type=memory_type)
    items, following = list_proposals(
        runtime.log, caller.tenant_id, where, limit=limit, after=after
    )
    return ProposalPagePublic(
        items=[ProposalPublic(**dict(item)) for item in items],
        next_cursor=None if following is None else encode_cursor(following),
    )


@router.get("/{proposal_id}", response_model=ProposalPublic, response_model_by_alias=True)
def read_proposal(proposal_id: UUID, caller: CallerDep, runtime: RuntimeDep) -> ProposalRecord:
    """Return one proposal: both memories' current text side by side, the verdict, its
    probability, the model, what the judge saw, and whether the memories changed since."""
    return proposal_record(runtime.log, caller.tenant_id, proposal_id)


@router.post(
    "/{proposal_id}/apply",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_APPLIED,
    dependencies=[Depends(requires(ProposalDecisionSpec))],
)
def apply_proposal(
    proposal_id: UUID, write: WriteDep, body: ProposalApply | None = None
) -> dict[str, Any]:
    """Apply a proposal (writer or admin), as a decision with its reason: archive
    forgets the memory (the reason names the proposal); supersede adds a `supersedes`
    edge from the newer memory to the older one (refused for `event` memories); conflict
    records the review, or resolves it with `resolution`. Returns the decision.
    `resolution` is for conflict proposals only: given for any other kind, the apply is
    refused (409 `resolution-not-applicable`) and nothing is written.

    A proposal that would archive a pinned memory is refused as stale (409
    `stale-proposal`): a person's pin stands. The collapse guard refuses (409
    `collapse-guard`) an archival (a forget, a supersede, a merge's sources) that would
    pass the tenant's daily allowance, shared with the decay cycle's and
    consolidation's automatic archivals (`PALIMPSEST_COLLAPSE_SHARE` of its memories,
    default 5%, and at least `PALIMPSEST_COLLAPSE_MINIMUM`), unless an administrator
    confirms it with `confirm_bulk` (what it archives still counts against the day)."""
    body = body or ProposalApply()
    spec = ProposalDecisionSpec(
        proposal_id, "apply", body.reason, body.resolution, confirm_bulk=body.confirm_bulk
    )
    return write.perform(body, spec)


@router.post(
    "/{proposal_id}/reject",
    status_code=201,
    response_model=DecisionOutcome,
    responses=_DECIDED,
    dependencies=[Depends(requires(ProposalDecisionSpec))],
)
def reject_proposal(proposal_id: UUID, body: ProposalReject, write: WriteDep) -> dict[str, Any]:
    """Reject a proposal (writer or admin), as a decision with its reason: final for
    this memory and action until the memory's freshness moves. Returns the decision."""
    return write.perform(body, ProposalDecisionSpec(proposal_id, "reject", body.reason))
