"""What the tools share: the types of their common arguments, their descriptions'
form, and a decision's answer."""

from __future__ import annotations

import inspect
from typing import Annotated, Any
from uuid import UUID

from pydantic import Field

from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._models import DecisionResult
from palimpsest.api.schemas._common import Label
from palimpsest.domain.limits import MAX_IDEMPOTENCY_KEY_CHARS
from palimpsest.projections.commands.caller import Caller

__all__ = [
    "MemoryId",
    "ModelId",
    "RequestId",
    "arguments",
    "decision_result",
    "described",
]

MemoryId = Annotated[
    UUID, Field(description="The memory's id, from recall, list or remember's answer.")
]
ModelId = Annotated[Label | None, Field(description="The model proposing it, if any.")]
RequestId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY_CHARS,
        pattern=r"^[\x21-\x7e]+$",
        description="Any unique string for this call (printable ASCII, no spaces). Retrying "
        "the same call with the same request_id after an error or a timeout never writes "
        "twice: it answers what the first call did.",
    ),
]


def described(text: str) -> str:
    """Return a tool description as written in the code, dedented: the model reads it
    as plain text, where a docstring's indentation would be noise."""
    return inspect.cleandoc(text)


def arguments(**given: Any) -> dict[str, Any]:
    """Return a call's arguments as its idempotency digest covers them (ids as text)."""
    return {k: str(v) if isinstance(v, UUID) else v for k, v in given.items()}


def decision_result(
    backend: Backend, caller: Caller, decided: dict[str, Any], memory_id: UUID | None
) -> DecisionResult:
    """Return a decision's outcome, with the memory's belief status after it."""
    return DecisionResult(
        decision_id=UUID(str(decided["id"])),
        kind=str(decided["kind"]),
        memory_id=memory_id,
        position=decided["position"],
        replayed=bool(decided["replayed"]),
        status=None if memory_id is None else backend.status(caller, memory_id),
    )
