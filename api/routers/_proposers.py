"""``/v1/proposers``: withdraw the support a proposer or a model contributed."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query

from palimpsest.api._deps import WriteDep
from palimpsest.api._specs import requires, withdraw_spec
from palimpsest.api.schemas import DecisionOutcome, WithdrawCreate
from palimpsest.api.schemas._common import CONTROLS, Label
from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.limits import MAX_LABEL_CHARS
from palimpsest.projections.commands.writer import WithdrawSpec

__all__ = [
    "router",
    "withdraw_proposer",
]

router = APIRouter(prefix="/v1/proposers", tags=["decisions"])

_MODEL_PREFIX = "model="
_PROPOSER_PATTERN = (
    "^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    f"|{_MODEL_PREFIX}[^\\x00{CONTROLS}]{{1,{MAX_LABEL_CHARS}}})$"
)
"""A principal id, or ``model=`` and a model id (a :data:`Label`)."""


@router.post(
    "/{proposer}/withdraw",
    status_code=201,
    response_model=DecisionOutcome,
    responses={200: {"model": DecisionOutcome, "description": "Replayed: nothing recorded."}},
    dependencies=[Depends(requires(WithdrawSpec))],
)
def withdraw_proposer(
    proposer: Annotated[
        str,
        Path(
            pattern=_PROPOSER_PATTERN,
            description="A proposer's principal id, or `model=<model id>` for a model's "
            "contributions by any proposer.",
        ),
    ],
    write: WriteDep,
    body: WithdrawCreate | None = None,
    model: Annotated[
        Label | None, Query(description="Only contributions made with this model")
    ] = None,
) -> dict[str, Any]:
    """Withdraw support, by a recorded decision: every active contribution by the
    proposer (only those made with `model`, when the query or body names one), or by the model
    (`/v1/proposers/model=judge-1.4/withdraw`), is deactivated, and exactly the memories
    whose support changes are revised. Text is untouched: withdrawal is not erasure.
    A proposer or model that never contributed answers 404 and nothing is recorded; the
    `reason`, if given, is recorded with the decision. The model may be named in the path,
    the query and the body: the names narrow together, so two different models match no
    contribution (404)."""
    body = body or WithdrawCreate()
    named = {m for m in (model, body.model) if m is not None}
    proposer_id: UUID | None = None
    if proposer.startswith(_MODEL_PREFIX):
        named.add(proposer.removeprefix(_MODEL_PREFIX))
    else:
        proposer_id = UUID(proposer)  # the path's pattern admits only a UUID here
    if len(named) > 1:
        msg = f"no contribution was made with every model named ({', '.join(sorted(named))})"
        raise NotFoundError(msg)
    chosen = next(iter(named), None)
    body = body.model_copy(update={"model": chosen})
    if proposer_id is None:
        return write.perform(body, withdraw_spec(None, chosen, body))
    return write.perform(body, withdraw_spec(proposer_id, None, body))
