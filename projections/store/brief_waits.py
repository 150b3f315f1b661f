"""Writes that would rather not happen than wait: for a caller that must not block long.

A serving process with one open connection runs that connection's write on its
event loop, sparing it a hop to a worker thread and back: 0.15-0.25 ms of a 2 ms
write (``palimpsest.api.worker_threads.in_thread_unless_alone``). The loop must not then wait
behind another transaction, or for a database that is away: a health check on a
new connection would wait with it. Inside :func:`briefly`, a write waits at most
``limit_s`` for any lock its transaction takes (the events table's, a row's),
not at all for this process's group commit, and is never tried again after a
database error (the connection lost, the server gone); in each case it raises
:class:`WouldWaitError` having written nothing, and the caller writes it again
where waiting is harmless. :func:`connection_idle` tells the caller whether a
write would start without waiting for a connection of the pool.

What the limit does not bound: the write's own statements; the reads it makes
before its transaction (no writer's lock stops them: only a table's exclusive
lock, which a rebuild's swap holds for a moment); finding out whether a write
whose connection failed after its ``COMMIT`` committed
(:mod:`palimpsest.projections.store.unknown_commits`); and a connection that stops
answering in the middle of a statement (a remote server cut off, a synchronous
standby that stops confirming). Each holds the caller as it would hold a thread
(``PALIMPSEST_WRITES_ON_LOOP=false`` keeps writes off the loop).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore

__all__ = ["WouldWaitError", "brief_limit", "briefly", "connection_idle"]

_limit: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "palimpsest_brief_lock_wait_s", default=None
)


class WouldWaitError(Exception):
    """Raised by a write inside :func:`briefly` that would have waited longer than its
    limit (for a lock or a group commit), or met a database error: nothing of it was
    written."""


@contextmanager
def briefly(limit_s: float) -> Iterator[None]:
    """Within the block (this context: not other threads'), writes wait at most
    ``limit_s`` (a positive number of seconds, rounded to whole milliseconds, at
    least one) for a lock, never for a group commit of this process, and are not
    tried again after a database error (:class:`WouldWaitError`)."""
    if not limit_s > 0:
        msg = f"a brief wait must be positive, not {limit_s!r}"
        raise ValueError(msg)
    token = _limit.set(limit_s)
    try:
        yield
    finally:
        _limit.reset(token)


def brief_limit() -> float | None:
    """Return how long a write of this context may wait for a lock (seconds), or
    None when it waits as long as the database's ``lock_timeout``."""
    return _limit.get()


def connection_idle(datastore: PostgresDatastore) -> bool:
    """Whether ``datastore``'s pool holds an idle connection now: a write taking one
    would not wait for another to be returned, or for a new one to connect."""
    return bool(datastore.pool.get_stats().get("pool_available", 0))
