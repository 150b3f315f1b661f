"""``/v1/proposers``: withdraw the support a proposer or a model contributed."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query

from api.deps import WriteDep
from api.schemas import DecisionOutcome, WithdrawCreate
from api.specs import withdraw_spec
from domain.errors import InvalidInputError

__all__ = [
    "router",
    "withdraw_proposer",
]

router = APIRouter(prefix="/v1/proposers", tags=["decisions"])

_MODEL_PREFIX = "model="


@router.post(
    "/{proposer}/withdraw",
    status_code=201,
    response_model=DecisionOutcome,
    responses={200: {"model": DecisionOutcome, "description": "Replayed: nothing recorded."}},
)
def withdraw_proposer(
    proposer: Annotated[
        str,
        Path(
            max_length=220,
            description="A proposer's principal id, or `model=<model id>` for a model's "
            "contributions by any proposer.",
        ),
    ],
    write: WriteDep,
    body: WithdrawCreate | None = None,
    model: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Only contributions made with this model"),
    ] = None,
) -> dict[str, Any]:
    """Withdraw support, by a recorded decision: every active contribution by the
    proposer (only those made with `model`, when the query or body names one), or by the model
    (`/v1/proposers/model=judge-1.4/withdraw`), is deactivated, and exactly the memories
    whose support changes are revised. Text is untouched: withdrawal is not erasure."""
    body = body or WithdrawCreate()
    if model is not None:
        if body.model not in (None, model):
            msg = "name the model once: in the query or in the body"
            raise InvalidInputError(msg)
        body = WithdrawCreate(model=model, reason=body.reason)
    if proposer.startswith(_MODEL_PREFIX):
        model = proposer.removeprefix(_MODEL_PREFIX)
        if not model or body.model not in (None, model):
            msg = "name the model once: in the path or in the body"
            raise InvalidInputError(msg)
        return write.perform(body, withdraw_spec(None, model, body))
    try:
        proposer_id = UUID(proposer)
    except ValueError:
        msg = f"{proposer!r} is neither a principal id nor model=<model id>"
        raise InvalidInputError(msg) from None
    return write.perform(body, withdraw_spec(proposer_id, None, body))
