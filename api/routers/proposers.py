"""``/v1/proposers``: withdraw the support a proposer or a model contributed."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Path, Query, Request, Response

from api.deps import CallerDep, IdempotencyKeyDep, WriterDep, perform_write
from api.schemas import DecisionOutcome, WithdrawCreate
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
    request: Request,
    response: Response,
    caller: CallerDep,
    writer: WriterDep,
    key: IdempotencyKeyDep,
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
    path_ids: dict[str, Any] = {}
    if proposer.startswith(_MODEL_PREFIX):
        model = proposer.removeprefix(_MODEL_PREFIX)
        if not model or body.model not in (None, model):
            msg = "name the model once: in the path or in the body"
            raise InvalidInputError(msg)
        path_ids["model_id"] = model
    else:
        try:
            path_ids["proposer_id"] = UUID(proposer)
        except ValueError:
            msg = f"{proposer!r} is neither a principal id nor model=<model id>"
            raise InvalidInputError(msg) from None
    return perform_write(request, response, writer, caller, key, body, path_ids=path_ids)
