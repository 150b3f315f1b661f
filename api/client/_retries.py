"""When a request is tried again, and after how long.

A call is retried on a connection error (no answer) and on 408, 429 and 5xx
answers, at most ``max_retries`` times. The wait doubles from
``initial_delay`` up to ``max_delay``, less up to a quarter at random (so
clients that failed together do not retry together), unless the answer says
how long with ``Retry-After`` (seconds or an HTTP date), which is honoured up
to ``max_retry_after``. Writes are safe to retry because every call that is
not a ``GET`` carries one ``Idempotency-Key`` for all its attempts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime

from palimpsest.domain.retry_after import retry_after_seconds

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How many times a call is retried, and the waits between its attempts."""

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    """A longer ``Retry-After`` is not waited for: the backoff applies instead."""

    def retries_status(self, status: int) -> bool:
        """Whether an answer with ``status`` is worth another attempt."""
        return status in (408, 429) or status >= 500

    def delay(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (counting from 0)."""
        asked = retry_after_seconds(retry_after, datetime.now(UTC))
        if asked is not None and asked <= self.max_retry_after:
            return asked
        backoff = min(self.initial_delay * 2.0**retry, self.max_delay)
        return backoff * (1.0 - 0.25 * random.random())
