"""``/v1/tenant``: the caller's tenant as a whole (retention, deletion)."""

from __future__ import annotations

from pydantic import BaseModel

from api.schemas.common import JsonPositiveInt, Reason, RequestBody

__all__ = [
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


class TenantDeletion(RequestBody):
    """Why the tenant is deleted (recorded on the decision; keep personal data out)."""

    reason: Reason = "tenant deletion requested"
