"""The caller of a command: an authenticated principal, its tenant and its role."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

__all__ = ["Caller"]


@dataclass(frozen=True)
class Caller:
    """An authenticated principal acting in its tenant with its token's role."""

    tenant_id: UUID
    principal_id: UUID
    principal_name: str
    role: str
    closed_by: UUID | None = None
    """The tenant's deletion decision, once its deletion was requested."""
