"""Retention deadlines, fixed once at capture."""

from __future__ import annotations

from datetime import datetime, timedelta

__all__ = ["retention_deadline"]


def retention_deadline(
    received_at: datetime,
    *,
    transient: bool,
    raw_retention: timedelta,
    transient_retention: timedelta,
) -> datetime:
    """Return when an observation's bytes must be deleted.

    The clock starts when palimpsest receives the bytes, not at the client's
    ``captured_at``: the deadline bounds how long *we* hold them, and a
    back-dated capture must not make bytes expire before they are stored.

    Returns:
        ``received_at`` plus the transient or the raw retention period.
    """
    return received_at + (transient_retention if transient else raw_retention)
