"""The deployment's capture policy: what the write path needs from the settings."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

__all__ = ["CapturePolicy"]


@dataclass(frozen=True)
class CapturePolicy:
    """Deployment values the write path needs (from ``ApiSettings``)."""

    raw_retention: timedelta
    transient_retention: timedelta
    clock_skew: timedelta = timedelta(minutes=5)
