"""``/v1/tenant``: the caller's tenant as a whole (retention, deletion)."""

from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import JsonInt, JsonPositiveInt, Reason, RequestBody
from palimpsest.domain.limits import MAX_DAILY_JUDGE_CALLS, MAX_DAILY_JUDGE_TOKENS

__all__ = [
    "JudgmentPublic",
    "JudgmentUpdate",
    "RetentionPublic",
    "RetentionUpdate",
    "TenantDeletion",
]


class RetentionUpdate(RequestBody):
    """The tenant's retention of observation bytes, in hours; an omitted value is
    kept. Each must be at most the deployment's maximum (published as each field's
    ``maximum`` in the OpenAPI document)."""

    raw_hours: JsonPositiveInt | None = None
    transient_hours: JsonPositiveInt | None = None


class RetentionPublic(BaseModel):
    """The retention new captures get, and the deployment's maxima."""

    raw_hours: int
    transient_hours: int
    max_raw_hours: int
    max_transient_hours: int
    position: int | None = None
    """The log position of the write that set it (a ``PUT``'s answer only)."""


class JudgmentUpdate(RequestBody):
    """Opt the tenant in or out of the forgetting pass, and its daily judge budget."""

    enabled: bool = Field(strict=True)
    daily_calls: JsonInt = Field(default=100, ge=0, le=MAX_DAILY_JUDGE_CALLS)
    daily_tokens: JsonInt = Field(default=500_000, ge=0, le=MAX_DAILY_JUDGE_TOKENS)


class JudgmentPublic(BaseModel):
    """The tenant's judgment policy, and what today's passes used of its budget."""

    tenant_id: UUID
    tenant_name: str
    enabled: bool
    daily_calls: int
    daily_tokens: int
    used_calls: int = Field(description="Judge calls reserved or made today (UTC).")
    used_tokens: int = Field(description="Tokens reserved or reported today (UTC).")


class TenantDeletion(RequestBody):
    """Why the tenant is deleted (recorded on the decision; keep personal data out)."""

    reason: Reason = "tenant deletion requested"
