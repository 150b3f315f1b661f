"""The caller of a command: an authenticated principal, its tenant and its role."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from palimpsest.domain.errors import PermissionDeniedError
from palimpsest.domain.role import ROLES, Role, can_administer, can_write

__all__ = ["Caller"]

_WANTED: dict[Role, str] = {
    "reader": "a token of the tenant",
    "writer": "a writer or admin token",
    "admin": "an admin token",
}


@dataclass(frozen=True)
class Caller:
    """An authenticated principal acting in its tenant with its token's role."""

    tenant_id: UUID
    principal_id: UUID
    principal_name: str
    role: str
    closed_by: UUID | None = None
    """The tenant's deletion decision, once its deletion was requested."""

    def may(self, needed: Role) -> bool:
        """Return whether the caller's role grants ``needed`` (admin > writer > reader)."""
        if needed == "admin":
            return can_administer(self.role)
        if needed == "writer":
            return can_write(self.role)
        return self.role in ROLES

    def require(self, needed: Role, action: str) -> None:
        """Refuse the caller unless its role grants ``needed``.

        ``action`` names what was asked, for the message ("erase", "write").

        Raises:
            PermissionDeniedError: the role does not grant ``needed``.
        """
        if not self.may(needed):
            msg = f"role {self.role!r} cannot {action}; {_WANTED[needed]} is required"
            raise PermissionDeniedError(msg)
