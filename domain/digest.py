"""Content digests: the only trace of content that events may carry."""

from __future__ import annotations

import hashlib

__all__ = ["content_digest"]


def content_digest(data: bytes) -> str:
    """Return the digest that names ``data`` in the payload store.

    Returns:
        ``"sha256:"`` followed by 64 lowercase hex digits.
    """
    return "sha256:" + hashlib.sha256(data).hexdigest()
