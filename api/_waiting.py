"""Waiting for the drains, and for new events, from async routes, holding no thread
while waiting.

A read with ``?wait=`` and a write waiting for its version's candidates check
their answer on a worker thread (the reads are synchronous psycopg), then,
if the drains have not caught up, await the tenant's publication notices
(:class:`~palimpsest.projections.views.publications.PublicationWatch`) on the event
loop, not in a thread. Between checks nothing is held: hundreds of waiting
requests cost no more threads or connections than idle ones. Each one that
waits holds a ``wait`` slot (:mod:`palimpsest.api._admission`) while it does.

An event stream awaits the same notices, and also the writes this process
committed, by tenant (a :class:`~palimpsest.projections.views.publications.TenantWakers`),
announced by :func:`announce_write` once each write has answered. Publication notices
cover writes of any process that change a belief; the rest (an observation,
a token) written by another process is seen at the stream's next recheck.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar
from uuid import UUID

from palimpsest.api._admission import ConcurrencyLimitError
from palimpsest.api._worker_threads import in_thread
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.publications import TenantWakers

if TYPE_CHECKING:
    from starlette.types import Scope

    from palimpsest.api._admission import Holder, Slot

__all__ = [
    "RECHECK_LISTENING_S",
    "RECHECK_S",
    "announce_write",
    "await_drains",
    "is_write",
    "jittered",
]

RECHECK_S = 1.0
"""Longest time between two checks while the publication watch is not listening:
what a lost notice costs at most then."""

RECHECK_LISTENING_S = 5.0
"""Longest time between two checks while the publication watch listens: every change
a wait ends on is then noticed (a publication, an index, a quarantine; the watch
wakes every waiter when it reconnects, for notices sent while it was down), so a
check only guards against what sends none. Each waiting request's check is a read:
hundreds of waits checking every second kept other tenants' requests waiting
(``tests/api/test_exhaustion.py``)."""

_T = TypeVar("_T")

_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def jittered(interval_s: float) -> float:
    """Return a time between half ``interval_s`` and ``interval_s``, at random, so
    that waits begun together (a burst of requests) do not recheck together."""
    return interval_s * random.uniform(0.5, 1.0)


async def await_drains(
    runtime: Runtime,
    tenant_id: UUID,
    check: Callable[[], _T],
    done: Callable[[_T], bool],
    wait_s: float,
    holder: Holder | None = None,
    *,
    when_full: Literal["refuse", "answer"] = "refuse",
    first: _T | None = None,
) -> _T:
    """Return ``check()``'s answer once ``done`` holds for it, or its last answer
    after ``wait_s`` seconds. ``check`` runs on a worker thread; between checks
    the task awaits a publication notice of ``tenant_id`` (or :data:`RECHECK_LISTENING_S`,
    :data:`RECHECK_S` while the publication watch is not listening).
    ``first`` is the first check's answer when the caller already has it (taken on
    the worker thread it was on anyway): returned if done, else checked again once
    subscribed, so a notice between the two is not lost.

    Once the first answer is not done, the wait holds one of ``holder``'s
    ``wait`` slots until it returns, which is soon after its client goes
    away (checked at each wake-up). With every slot taken, ``when_full``
    says what happens: ``refuse`` raises, ``answer`` returns the first answer
    without waiting (for a write, which has committed and must not fail).

    Raises:
        ConcurrencyLimitError: ``when_full`` is ``refuse``, and the token or the
            tenant holds as many waits as allowed.
    """
    if wait_s <= 0 and first is None:
        # No wait: one check, and no subscription to notices nobody will wait for
        # (issue 48: it was a seventh of the event loop's time of a read by id).
        return await in_thread(check)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    slot: Slot | None = None
    with runtime.publications.subscribe(tenant_id) as noticed:
        try:
            while True:
                if first is None:
                    noticed.clear()  # before the check: a notice after it is never lost
                    answer = await in_thread(check)
                else:
                    answer, first = first, None
                    if not done(answer):
                        # Checked before subscribing: a notice in between was missed,
                        # and waiting for the next would cost up to a recheck (5 s,
                        # seen in read-your-writes trials). Check again now, subscribed.
                        continue
                remaining = deadline - loop.time()
                if done(answer) or remaining <= 0:
                    return answer
                if slot is None and holder is not None:
                    slot = _wait_slot(holder, when_full)
                    if slot is None:
                        return answer
                recheck_s = (
                    RECHECK_LISTENING_S if runtime.publications.listening.is_set() else RECHECK_S
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(noticed.wait(), min(remaining, jittered(recheck_s)))
                if holder is not None and await holder.disconnected():
                    return answer  # nobody to answer: give the slot back now, not at the end
        finally:
            if slot is not None:
                slot.release()


def _wait_slot(holder: Holder, when_full: Literal["refuse", "answer"]) -> Slot | None:
    try:
        return holder.hold("wait")
    except ConcurrencyLimitError:
        if when_full == "refuse":
            raise
        return None


def is_write(scope: Scope) -> bool:
    """Return whether an HTTP request may be a write: its method changes state."""
    return scope["method"] in _WRITE_METHODS


def announce_write(writes: TenantWakers, scope: Scope, status: int) -> None:
    """Wake ``writes`` for a write (:func:`is_write`) whose answer starts with ``status``,
    by its caller's tenant, if it succeeded.

    A write succeeded when answered below 400 for an authenticated caller (the
    route put its tenant on the request state). Called once its answer has
    started, after its commit.
    """
    if status < 400:
        tenant = (scope.get("state") or {}).get("tenant_id")
        if tenant is not None:
            writes.wake(UUID(tenant))
