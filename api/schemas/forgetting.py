"""``/v1/forgetting``: an operator as the forgetting pass's judge."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas.common import Label, Reason, RequestBody

__all__ = [
    "JudgeItemsPublic",
    "OperatorVerdict",
    "PassRunCreate",
    "PassRunPublic",
    "VerdictRecorded",
    "VerdictsCreate",
    "VerdictsRecorded",
]

MAX_VERDICTS = 100
"""Verdicts one request records."""


class OperatorVerdict(RequestBody):
    """A person's verdict about a memory, with the confidence they state."""

    memory_id: UUID
    action: Literal["keep", "archive", "supersede", "conflict"]
    related_memory_id: UUID | None = Field(
        default=None, description="The newer memory (supersede) or the other side (conflict)."
    )
    confidence: Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
    note: Reason | None = None


class VerdictsCreate(RequestBody):
    """Verdicts to record as proposals, all or nothing."""

    verdicts: Annotated[list[OperatorVerdict], Field(min_length=1, max_length=MAX_VERDICTS)]
    judge: Label | None = Field(
        default=None,
        description="Who judged, recorded as the proposals' model (default: operator:<name>).",
    )


class VerdictRecorded(BaseModel):
    """One recorded verdict: `proposed` (listed for review) or `dismissed` (a keep, or
    below its action's threshold)."""

    id: UUID
    status: Literal["proposed", "dismissed"]


class VerdictsRecorded(BaseModel):
    """The recorded verdicts, in the order given, and the run they belong to."""

    run_id: UUID
    results: list[VerdictRecorded]


class PassRunCreate(RequestBody):
    """Run the forgetting pass over the caller's tenant now."""

    dry_run: bool = Field(
        default=False,
        strict=True,
        description="Select and render what would be judged; call no judge, write nothing.",
    )


class PassRunPublic(BaseModel):
    """What one forgetting pass over the tenant did."""

    run_id: UUID
    dry_run: bool
    singles: int
    pairs: int
    items: int
    batches: int
    judged: int
    proposed: int
    dismissed: int
    failed: int
    already_open: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    stopped: Literal["not-opted-in", "opted-out", "budget", "judge-unavailable"] | None = Field(
        description="Why it stopped before judging every item, if it did."
    )
    failures: list[str]


class JudgeItemsPublic(BaseModel):
    """What the pass would send a judge now: the rendered state (seed 000's shape)."""

    now: datetime
    items: list[dict[str, Any]]
