"""How long a ``Retry-After`` header asks a client to wait.

A pure rule of HTTP (RFC 9110 §10.2.3), here because both sides of palimpsest read
it: the server's one HTTP client to model servers (``projections/store/http_client.py``)
and the Python client (``api/client/_retries.py``), which the base install runs with
none of the server's dependencies. This module imports the standard library only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["retry_after_seconds"]


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Return the seconds a ``Retry-After`` value asks to wait at ``now``: delta-seconds
    or an HTTP date, never negative; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
