"""Opaque pagination cursors: a listing's :class:`ListingCursor`, base64url-encoded."""

from __future__ import annotations

import base64
from uuid import UUID

from domain.errors import InvalidInputError
from projections.views.listing import ListingCursor

__all__ = ["decode_cursor", "encode_cursor"]


def encode_cursor(after: ListingCursor) -> str:
    """Return the opaque cursor for where a page ended."""
    raw = f"{after.position}:{after.memory_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> ListingCursor:
    """Return where the page a cursor was made for ended.

    Raises:
        InvalidInputError: the cursor was not made by :func:`encode_cursor`.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        position, memory_id = raw.split(":", 1)
        return ListingCursor(int(position), UUID(memory_id))
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"cursor {cursor!r} is not valid; pass back a next_cursor from a listing"
        raise InvalidInputError(msg) from e
