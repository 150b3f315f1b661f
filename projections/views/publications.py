"""Waiting for revision without holding a thread: publication notices.

The revision and indexing drains, wherever they run (this process or a
dramatiq worker), send ``NOTIFY`` on :func:`publication_channel` with the
tenant's id in the transaction that publishes beliefs or indexes versions;
PostgreSQL delivers it at commit. One
connection per process listens (:class:`PublicationWatch`, a daemon thread)
and wakes the asyncio tasks waiting on that tenant, so a request that waits
for revision holds no worker thread and no pooled connection while it waits.

A waiter is also woken after ``timeout`` whatever happens, so a lost notice
(the listening connection dropped and came back) costs at most one interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Iterator
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from palimpsest.projections.store.database import Database

__all__ = ["PublicationWatch", "TenantWakers", "publication_channel"]

_log = logging.getLogger(__name__)


def publication_channel(schema: str) -> str:
    """Return the ``NOTIFY`` channel of a deployment's publications (one per schema,
    so that two deployments sharing a server do not wake each other)."""
    return f"palimpsest_published_{schema}"[:63]


class TenantWakers:
    """asyncio events to set, by tenant, from any thread: what a notice wakes.

    Each event belongs to the loop that attached it and is set on that loop
    (``call_soon_threadsafe``), so a listening thread, or a middleware of
    another loop, may wake tasks it does not own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[UUID, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = (
            defaultdict(set)
        )

    @contextlib.contextmanager
    def attach(self, tenant_id: UUID, event: asyncio.Event) -> Iterator[None]:
        """Set ``event`` (on the running loop) at each :meth:`wake` of ``tenant_id``
        while inside the block."""
        waiter = (asyncio.get_running_loop(), event)
        with self._lock:
            self._waiters[tenant_id].add(waiter)
        try:
            yield
        finally:
            with self._lock:
                self._waiters[tenant_id].discard(waiter)
                if not self._waiters[tenant_id]:
                    del self._waiters[tenant_id]

    @contextlib.contextmanager
    def subscribe(self, tenant_id: UUID) -> Iterator[asyncio.Event]:
        """Yield a new event, attached for ``tenant_id`` while inside the block."""
        event = asyncio.Event()
        with self.attach(tenant_id, event):
            yield event

    def waiting(self) -> int:
        """Return how many events are attached now."""
        with self._lock:
            return sum(len(w) for w in self._waiters.values())

    def wake(self, tenant_id: UUID) -> None:
        """Set every event attached for ``tenant_id``."""
        with self._lock:
            waiters = list(self._waiters.get(tenant_id, ()))
        self._set(waiters)

    def wake_all(self) -> None:
        """Set every event attached, for every tenant."""
        with self._lock:
            waiters = [w for attached in self._waiters.values() for w in attached]
        self._set(waiters)

    @staticmethod
    def _set(waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]) -> None:
        for loop, event in waiters:
            # A closed loop raises RuntimeError: its waiter is gone with it.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(event.set)


class PublicationWatch:
    """Wakes waiters when a tenant's beliefs are published.

    Start it once per process (:meth:`start`); :meth:`subscribe` may then be
    used from any event loop. Without :meth:`start` (or while the listening
    connection is down) waiters wake at their timeout: never later, only
    less promptly.
    """

    def __init__(self, database: Database) -> None:
        self._database = database
        self.wakers = TenantWakers()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.listening = threading.Event()
        """Set while the listening connection is up (for readiness and tests)."""

    def start(self) -> None:
        """Start listening on a daemon thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._listen, name="publication-watch", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop listening; waiters fall back to their timeouts."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @contextlib.contextmanager
    def subscribe(self, tenant_id: UUID) -> Iterator[asyncio.Event]:
        """Yield an event set (on the running loop) by each notice for ``tenant_id``.

        Clear it, then read, then await it: a notice that commits after the
        clear is never missed. Holds no thread while awaited.
        """
        with self.wakers.subscribe(tenant_id) as event:
            yield event

    def waiting(self) -> int:
        """Return how many waiters there are now."""
        return self.wakers.waiting()

    def wake(self, tenant_id: UUID) -> None:
        """Wake every waiter of ``tenant_id`` (what a notice does)."""
        self.wakers.wake(tenant_id)

    def _listen(self) -> None:
        database = self._database
        conninfo = make_conninfo(
            "",
            host=database.host,
            port=database.port,
            dbname=database.dbname,
            user=database.app_user,
            password=database.app_password,
        )
        channel = sql.Identifier(publication_channel(database.schema))
        backoff = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(channel))
                    self.listening.set()
                    # Notices sent while it was not listening are lost: wake everyone.
                    self.wakers.wake_all()
                    backoff = 0.5
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=1.0):
                            self._on_notice(notice.payload)
            except psycopg.Error as e:
                # One warning per outage; the retries that follow are debug lines.
                level = logging.WARNING if self.listening.is_set() else logging.DEBUG
                self.listening.clear()
                _log.log(
                    level,
                    "publication watch lost its connection; waiters fall back to polling",
                    extra={"error": str(e).strip(), "retry_in_s": backoff},
                )
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)
        self.listening.clear()

    def _on_notice(self, payload: str) -> None:
        try:
            tenant_id = UUID(payload)
        except ValueError:
            return  # not ours: another sender on the channel
        self.wake(tenant_id)
