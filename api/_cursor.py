"""Opaque pagination cursors: a listing's :class:`ListingCursor`, base64url-encoded."""

from __future__ import annotations

import base64
import hashlib
from uuid import UUID

from palimpsest.domain.errors import InvalidInputError
from palimpsest.projections.views.listing import ListingCursor

__all__ = ["decode_cursor", "decode_recall_cursor", "encode_cursor", "encode_recall_cursor"]


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


def _recall_fingerprint(request: str) -> str:
    return hashlib.sha256(request.encode()).hexdigest()[:16]


def encode_recall_cursor(offset: int, request: str) -> str:
    """Return the opaque cursor of the recall page starting after ``offset`` memories,
    for the recall described by ``request`` (its query, mode and filters)."""
    raw = f"recall:{offset}:{_recall_fingerprint(request)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_recall_cursor(cursor: str, request: str) -> int:
    """Return how many memories the recall pages before ``cursor`` held.

    Raises:
        InvalidInputError: the cursor was not made by :func:`encode_recall_cursor`
            for the same recall (query, mode and filters).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        kind, offset, fingerprint = raw.split(":", 2)
        if kind != "recall" or int(offset) < 0 or fingerprint != _recall_fingerprint(request):
            raise ValueError(raw)
        return int(offset)
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"cursor {cursor!r} is not valid; pass back a next_cursor of the same recall"
        raise InvalidInputError(msg) from e
