"""Roles a principal's token grants within a tenant."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "ROLES",
    "Role",
    "can_administer",
    "can_write",
]

Role = Literal["reader", "writer", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)


def can_write(role: str) -> bool:
    """Return whether ``role`` may append observations, memories, versions and edges."""
    return role in ("writer", "admin")


def can_administer(role: str) -> bool:
    """Return whether ``role`` may manage the tenant (tokens, retention, erasure)."""
    return role == "admin"
