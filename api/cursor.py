"""Opaque pagination cursors."""

from __future__ import annotations

import base64
from uuid import UUID

from domain.errors import InvalidInputError

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(after: tuple[int, UUID]) -> str:
    """Return the opaque cursor for a (position, id) pair."""
    raw = f"{after[0]}:{after[1]}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, UUID]:
    """Return the (position, id) pair of a cursor.

    Raises:
        InvalidInputError: the cursor was not made by :func:`encode_cursor`.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        position, memory_id = raw.split(":", 1)
        return int(position), UUID(memory_id)
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"cursor {cursor!r} is not valid; pass back a next_cursor from a listing"
        raise InvalidInputError(msg) from e
