"""Drain work one stage and one tenant at a time: a failure stays where it happened.

A drain pass runs stages (retention, expiry, tenant erasure, revisions,
indexing), each over the tenants that have its work due. One tenant's
failure in one stage (a corrupt event, a batch the erasure refuses, a bug)
must not stop that stage for other tenants, nor other stages for anyone:
each (stage, tenant) runs alone, and one that fails is logged as one
structured line, counted (``palimpsest_drain_failures_total{stage=...}``)
and left alone for a growing while before it is tried again. Its work stays
in the database, so nothing is lost while it waits.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar
from uuid import UUID

from palimpsest.projections.drains.counters import DRAIN_FAILURES, count

__all__ = [
    "Backoff",
    "read_listing",
    "run_stage",
]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

Key = tuple[str, UUID | None]
"""A stage, and its tenant (None: listing the stage's tenants)."""


@dataclass
class _Failing:
    failures: int
    retry_at: float


class Backoff:
    """When each failing (stage, tenant) may run again: ``base_s`` after its first
    failure, doubling with each failure after, at most ``max_s``. A success forgets
    the failures. Thread-safe."""

    def __init__(
        self,
        *,
        base_s: float = 1.0,
        max_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.clock = clock
        self._failing: dict[Key, _Failing] = {}
        self._lock = threading.Lock()

    def ready(self, key: Key) -> bool:
        """Return whether ``key`` may run now."""
        with self._lock:
            failing = self._failing.get(key)
        return failing is None or self.clock() >= failing.retry_at

    def failed(self, key: Key) -> tuple[int, float]:
        """Record a failure of ``key``; return its failures in a row and the wait before
        the next try."""
        with self._lock:
            failures = self._failing[key].failures + 1 if key in self._failing else 1
            wait = min(self.max_s, self.base_s * 2 ** (failures - 1))
            self._failing[key] = _Failing(failures, self.clock() + wait)
        return failures, wait

    def succeeded(self, key: Key) -> None:
        """Forget the failures of ``key``."""
        with self._lock:
            self._failing.pop(key, None)

    def failing(self) -> dict[Key, int]:
        """Return the keys failing now, with their failures in a row."""
        with self._lock:
            return {key: f.failures for key, f in self._failing.items()}


def _failed(backoff: Backoff, key: Key, error: Exception) -> None:
    failures, wait = backoff.failed(key)
    count(DRAIN_FAILURES, key[0])
    # The traceback once, at the first failure in a row; each retry after is a short
    # line with its count: a failure that lasts days logs once per backoff step, not a
    # traceback at every try.
    _log.error(
        "drain stage failed",
        exc_info=error if failures == 1 else None,
        extra={
            "stage": key[0],
            "tenant_id": None if key[1] is None else str(key[1]),
            "failures": failures,
            "retry_in_s": round(wait, 3),
            "error": f"{type(error).__name__}: {error}"[:_ERROR_CHARS],
        },
    )


_ERROR_CHARS = 200
"""How much of a repeated failure's message its line carries."""


def read_listing(stage: str, read: Callable[[], _T], backoff: Backoff) -> _T | None:
    """Return ``read()``, what ``stage`` has due; or None while its listing backs off,
    or when ``read`` fails (logged, counted and backed off as ``(stage, None)``).
    Never raises (bar ``BaseException``)."""
    listing: Key = (stage, None)
    if not backoff.ready(listing):
        return None
    try:
        listed = read()
    except Exception as error:
        _failed(backoff, listing, error)
        return None
    backoff.succeeded(listing)
    return listed


def run_stage(
    stage: str,
    tenants: Callable[[], Iterable[UUID]],
    work: Callable[[UUID], int],
    backoff: Backoff,
) -> int:
    """Run ``work`` for each tenant ``tenants()`` lists that ``backoff`` lets run;
    return the sum of what the runs did.

    Never raises (bar ``BaseException``): a failure to list the tenants, or
    of one tenant's run, is logged, counted and backed off, and the other
    tenants go on.
    """
    due = read_listing(stage, lambda: list(tenants()), backoff)
    if due is None:
        return 0
    done = 0
    for tenant_id in due:
        key: Key = (stage, tenant_id)
        if not backoff.ready(key):
            continue
        try:
            done += work(tenant_id)
        except Exception as error:
            _failed(backoff, key, error)
        else:
            backoff.succeeded(key)
    return done
