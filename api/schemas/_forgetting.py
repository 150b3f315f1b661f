"""``/v1/forgetting``: an operator as the forgetting pass's judge."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

from palimpsest.api.schemas._common import Label, Reason, RequestBody
from palimpsest.domain.verdicts import REF_PATTERN

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
    """A person's verdict about a memory, with the confidence they state: the memory
    named by id, or its item by ref (of the listing whose `items_digest` the request
    carries)."""

    memory_id: UUID | None = None
    ref: Annotated[str, Field(pattern=f"^{REF_PATTERN}$", max_length=64)] | None = Field(
        default=None,
        description="The item's ref in GET /v1/forgetting/items (`s0`, `p0`), instead of "
        "memory_id: a single's memory, or a pair's older side.",
    )
    action: Literal["keep", "archive", "supersede", "conflict"]
    related_memory_id: UUID | None = Field(
        default=None, description="The newer memory (supersede) or the other side (conflict)."
    )
    related_ref: Annotated[str, Field(pattern=f"^{REF_PATTERN}$", max_length=64)] | None = Field(
        default=None,
        description="With ref, a single's supersede or conflict: the newer neighbour's ref "
        "(`s0n1`); a pair's other side is implied.",
    )
    confidence: Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
    note: Reason | None = None

    # What the validator below refuses, stated in the OpenAPI document too, so that
    # no client (nor a fuzzer) is told a verdict naming neither, or both, is valid.
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["memory_id"],
                    "properties": {
                        "memory_id": {"not": {"type": "null"}},
                        "ref": {"type": "null"},
                        "related_ref": {"type": "null"},
                    },
                },
                {
                    "required": ["ref"],
                    "properties": {
                        "ref": {"not": {"type": "null"}},
                        "memory_id": {"type": "null"},
                        "related_memory_id": {"type": "null"},
                    },
                },
            ]
        }
    )

    @model_validator(mode="after")
    def _one_name(self) -> OperatorVerdict:
        if (self.memory_id is None) == (self.ref is None):
            msg = "name the memory by memory_id or its item by ref (one of them)"
            raise ValueError(msg)
        if self.ref is None and self.related_ref is not None:
            msg = "related_ref goes with ref; with memory_id, use related_memory_id"
            raise ValueError(msg)
        if self.ref is not None and self.related_memory_id is not None:
            msg = "with ref, the related memory is related_ref (or implied by a pair)"
            raise ValueError(msg)
        return self


class VerdictsCreate(RequestBody):
    """Verdicts to record as proposals, all or nothing."""

    model_config = ConfigDict(
        json_schema_extra={
            # A verdict that names a ref needs the listing's digest.
            "if": {
                "required": ["verdicts"],
                "properties": {
                    "verdicts": {
                        "contains": {
                            "required": ["ref"],
                            "properties": {"ref": {"not": {"type": "null"}}},
                        }
                    }
                },
            },
            "then": {
                "required": ["items_digest"],
                "properties": {"items_digest": {"not": {"type": "null"}}},
            },
        }
    )

    verdicts: Annotated[list[OperatorVerdict], Field(min_length=1, max_length=MAX_VERDICTS)]
    judge: Label | None = Field(
        default=None,
        description="Who judged, recorded as the proposals' model (default: operator:<name>).",
    )
    items_digest: Annotated[str, Field(pattern=r"^[0-9a-f]+$", max_length=64)] | None = Field(
        default=None,
        description="The items_digest of the listing the refs were read from (required "
        "when a verdict names a ref; 409 items-changed when the items moved on).",
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
    queued: int = Field(
        description="Items left for people to judge (PALIMPSEST_JUDGE=operator), listed at "
        "GET /v1/forgetting/items."
    )
    calls: int
    prompt_tokens: int
    completion_tokens: int
    stopped: Literal["not-opted-in", "opted-out", "budget", "judge-unavailable"] | None = Field(
        description="Why it stopped before judging every item, if it did."
    )
    failures: list[str]


class JudgeItemsPublic(BaseModel):
    """What the pass would have judged now, for a person: each item with its ref, and
    each side with its memory id, scope, project, content, times and evidence."""

    now: datetime
    items_digest: str = Field(
        description="Names this listing: verdicts naming items by ref carry it."
    )
    items: list[dict[str, Any]]
