"""``/v1/tenant``: the caller's tenant as a whole (retention, deletion)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.schemas.common import Reason, RequestBody

__all__ = [
    "RetentionPublic",
    "RetentionUpdate",
    "TenantDeletion",
]


class RetentionUpdate(RequestBody):
    """The tenant's retention of observation bytes, in hours; an omitted value is
    kept. Each must be at most the deployment's maximum."""

    raw_hours: int | None = Field(default=None, ge=1)
    transient_hours: int | None = Field(default=None, ge=1)


class RetentionPublic(BaseModel):
    """The retention new captures get, and the deployment's maxima."""

    raw_hours: int
    transient_hours: int
    max_raw_hours: int
    max_transient_hours: int
    position: int | None = None


class TenantDeletion(RequestBody):
    """Why the tenant is deleted (recorded on the decision; keep personal data out)."""

    reason: Reason = "tenant deletion requested"
