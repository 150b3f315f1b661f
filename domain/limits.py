"""Documented input limits, and the pure checks that enforce them.

The limits are part of the API contract (docs/api.md lists them), so they are
constants here rather than settings: a client written against one deployment
works against another.
"""

from __future__ import annotations

from palimpsest.domain.errors import ContentTooLargeError, InvalidInputError

__all__ = [
    "MAX_BATCH_ITEMS",
    "MAX_DAILY_JUDGE_CALLS",
    "MAX_DAILY_JUDGE_TOKENS",
    "MAX_EVIDENCE_ITEMS",
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "MAX_LABEL_CHARS",
    "MAX_OBSERVATION_BYTES",
    "MAX_REASON_CHARS",
    "MAX_VERSION_BYTES",
    "encode_content",
]

MAX_OBSERVATION_BYTES = 1024 * 1024
"""An observation's content, UTF-8 encoded: 1 MiB."""

MAX_VERSION_BYTES = 64 * 1024
"""A memory version's content, UTF-8 encoded: 64 KiB."""

MAX_EVIDENCE_ITEMS = 64
"""Evidence excerpts cited by one memory version."""

MAX_BATCH_ITEMS = 1000
"""Writes in one ``POST /v1/batch``."""

MAX_LABEL_CHARS = 200
"""Scope, project, topic, source, media type, principal and tenant names."""

MAX_REASON_CHARS = 1000
"""The reason given for a forget, a retraction or a withdrawal."""

MAX_IDEMPOTENCY_KEY_CHARS = 255
"""Length of an ``Idempotency-Key`` header."""

MAX_DAILY_JUDGE_CALLS = 10_000
"""The most judge calls a tenant's forgetting pass may budget per day."""

MAX_DAILY_JUDGE_TOKENS = 100_000_000
"""The most judge tokens (prompt and completion) a tenant may budget per day."""


def encode_content(text: str, *, limit_bytes: int, what: str, allow_blank: bool) -> bytes:
    """Return ``text`` as UTF-8 after checking it is non-empty and within ``limit_bytes``.

    Raises:
        InvalidInputError: the text is empty (or blank when not allowed), or
            holds lone surrogates, which have no UTF-8 encoding.
        ContentTooLargeError: the encoded text is longer than ``limit_bytes``.
    """
    if not text or (not allow_blank and not text.strip()):
        msg = f"{what} must not be empty" if not text else f"{what} must not be blank"
        raise InvalidInputError(msg)
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError as e:
        msg = f"{what} is not valid Unicode (lone surrogate at character {e.start})"
        raise InvalidInputError(msg) from e
    if len(data) > limit_bytes:
        msg = f"{what} is {len(data)} bytes; the limit is {limit_bytes} bytes"
        raise ContentTooLargeError(msg)
    return data
