"""Process-wide counts of what went wrong in the background, for ``/metrics``.

Drains and hints run beside the HTTP app (the in-process loop, the broker
sender) and outlive any one app instance, so their failures are counted
here, once per process, and each app's metrics read them at scrape time.
"""

from __future__ import annotations

import threading
from collections import Counter

__all__ = [
    "DRAIN_FAILURES",
    "HINTS_UNSENT",
    "JUDGE_REFUSED",
    "JUDGE_USAGE",
    "count",
    "counts",
]

DRAIN_FAILURES = "drain_failures"
"""A drain stage failed (labelled by stage): its work stays in the database."""

HINTS_UNSENT = "hints_unsent"
"""A post-commit wake-up hint could not be sent (labelled by destination)."""

JUDGE_USAGE = "judge_usage"
"""What the forgetting pass's judge calls cost (labelled ``calls``, ``prompt_tokens``,
``completion_tokens``), as the servers reported it."""

JUDGE_REFUSED = "judge_budget_refusals"
"""Judge calls a tenant's daily budget refused (labelled by operation)."""

_lock = threading.Lock()
_counts: Counter[tuple[str, str]] = Counter()


def count(name: str, label: str, n: int = 1) -> None:
    """Add ``n`` (one by default) to counter ``name`` for ``label``."""
    with _lock:
        _counts[(name, label)] += n


def counts(name: str) -> dict[str, int]:
    """Return counter ``name`` by label (labels never counted are absent)."""
    with _lock:
        return {label: n for (counter, label), n in _counts.items() if counter == name}
