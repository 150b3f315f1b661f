"""Waiting for the drains from async routes, holding no thread while waiting.

A read with ``?wait=`` and a write waiting for its version's candidates check
their answer on a worker thread (the reads are synchronous psycopg), then,
if the drains have not caught up, await the tenant's publication notices
(:class:`~projections.views.publications.PublicationWatch`) on the event
loop, not in a thread. Between checks nothing is held: hundreds of waiting
requests cost no more threads or connections than idle ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar
from uuid import UUID

from starlette.concurrency import run_in_threadpool

from projections.runtime import Runtime

__all__ = ["RECHECK_S", "await_drains"]

RECHECK_S = 1.0
"""Longest time between two checks: what a lost notice, or a wait that no
publication ends (a retention deadline passing), costs at most."""

_T = TypeVar("_T")


async def await_drains(
    runtime: Runtime,
    tenant_id: UUID,
    check: Callable[[], _T],
    done: Callable[[_T], bool],
    wait_s: float,
) -> _T:
    """Return ``check()``'s answer once ``done`` holds for it, or its last answer
    after ``wait_s`` seconds. ``check`` runs on a worker thread; between checks
    the task awaits a publication notice of ``tenant_id`` (or :data:`RECHECK_S`)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    with runtime.publications.subscribe(tenant_id) as noticed:
        while True:
            noticed.clear()  # before the check: a notice after it is never lost
            answer = await run_in_threadpool(check)
            remaining = deadline - loop.time()
            if done(answer) or remaining <= 0:
                return answer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(noticed.wait(), min(remaining, RECHECK_S))
