"""The in-process drain loop that ``serve`` runs beside the HTTP server, and the
election that lets exactly one of several serving processes run it."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

import psycopg
from psycopg import sql

from palimpsest.projections.drains.isolation import Backoff, read_listing
from palimpsest.projections.drains.revision import LEASE_SECONDS
from palimpsest.projections.drains.stages import drain_stages, run_pass
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.tenancy import read_transaction
from palimpsest.projections.store.work_due import PassKind, due_work

__all__ = ["DRAINS_LOCK_KEY", "DrainLoop", "ElectedDrains", "PeriodicJob", "drains_elected"]

_log = logging.getLogger(__name__)


class DrainLoop:
    """Drains in a background thread of this process (the embedded default).

    ``wake()`` is the hint a write sends after it commits; the loop also
    sweeps every ``sweep_s`` seconds, so a hint that never came only delays
    work. Each pass runs the stages of :func:`palimpsest.projections.drains.stages.drain_stages`
    in order: retention, expiry (by ``clock``), tenant erasure and revisions
    (each again while it finds work), then (with an ``embedder``) indexing.

    Each stage reads only the tenants with its work due, and each (stage,
    tenant) fails alone: a failure is logged, counted on ``/metrics`` and
    retried after a growing wait (``backoff``), while every other tenant and
    stage goes on. The loop outlives a database restart: the work stays in
    the database, and the next pass retries it.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        sweep_s: float = 1.0,
        batch: int = 100,
        lease_s: float = LEASE_SECONDS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        embedder: Embedder | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.log = log
        self.embedder = embedder
        self.clock = clock
        self.lease_s = lease_s
        self.sweep_s = sweep_s
        self.batch = batch
        self.backoff = backoff or Backoff(base_s=sweep_s, max_s=max(300.0, sweep_s))
        self.stages = drain_stages(
            log, batch=batch, lease_s=lease_s, clock=clock, embedder=embedder
        )
        self.passes = 0
        """Passes completed so far (tests wait on it rather than on time)."""
        self._passed = threading.Condition()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="palimpsest-drain", daemon=True)

    def start(self) -> None:
        """Start draining (a first pass runs at once: work left by a previous run)."""
        self._wake.set()
        self._thread.start()

    def wake(self) -> None:
        """Ask for a pass now (a hint: safe to call any number of times)."""
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the loop's thread is alive (``/readyz`` reports it)."""
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the current batch and stop."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def wait_for_passes(self, passes: int, timeout_s: float) -> bool:
        """Wait until ``passes`` passes have completed; return whether they had."""
        with self._passed:
            return self._passed.wait_for(lambda: self.passes >= passes, timeout_s)

    def run_once(self, *, first: bool = False) -> None:
        """Run one pass of every stage now, in this thread (``first``: the pass that also
        looks at tenants no mark records, as the loop's first pass does)."""
        # Every stage's due tenants in one statement, while no stage of this pass has
        # done anything: work done (a shortened retention, a publish) can make a
        # later stage due, which then reads its tenants itself.
        known = self._due()
        stages = list(self.stages)
        widen = first
        while stages and not self._stop.is_set():
            busy = False
            for stage in stages:
                if self._stop.is_set():
                    return
                due = None if known is None or stage.kind is None else known[stage.kind]
                did = run_pass(stage, self.backoff, first=widen, due=due)
                if did:
                    known = None
                    busy = busy or stage.repeat
            # While a repeating stage drains a backlog, every repeating stage runs
            # again in turn, a batch each: a tenant's import being indexed never
            # holds another tenant's writes unpublished until it ends.
            stages = [stage for stage in self.stages if stage.repeat] if busy else []
            widen, known = False, None

    def _due(self) -> dict[PassKind, dict[UUID, int]] | None:
        """The due tenants of the stages that have a :attr:`Stage.kind` (:func:`due_work`),
        or None when they could not be read (logged, counted and backed off as the
        ``due`` stage's listing): each stage then reads its own, and fails and backs
        off alone."""
        return read_listing("due", lambda: due_work(self.log.datastore, self.clock()), self.backoff)

    def _warm_up(self) -> None:
        """Load the embedding model now, beside the loop (which it must not delay),
        so the first write after start-up finds it ready: importing torch takes
        seconds."""
        if self.embedder is None:
            return
        try:
            self.embedder.embed(["warm up"])
        except Exception:
            _log.exception("embedder failed to load; indexing retries at each pass")

    def _run(self) -> None:
        threading.Thread(target=self._warm_up, name="palimpsest-warm-up", daemon=True).start()
        first = True
        while not self._stop.is_set():
            self._wake.wait(self.sweep_s)
            self._wake.clear()
            self.run_once(first=first)
            first = False
            with self._passed:
                self.passes += 1
                self._passed.notify_all()


class PeriodicJob:
    """Calls ``job(now)`` every ``interval_s`` seconds on its own daemon thread, so a
    long job (a day's forgetting pass, waiting on a model) never holds up the drains.
    A job's failure is logged; the next call tries again."""

    def __init__(
        self,
        name: str,
        job: Callable[[datetime], object],
        *,
        interval_s: float = 60.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.name = name
        self.job = job
        self.interval_s = interval_s
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"palimpsest-{name}", daemon=True)

    def start(self) -> None:
        """Start calling the job (the first call is at once)."""
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the current call."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.job(self.clock())
            except Exception:
                _log.exception("periodic job failed", extra={"job": self.name})
            self._stop.wait(self.interval_s)


DRAINS_LOCK_KEY = 0x70616C647261696E
"""The advisory lock ("paldrain") whose holder runs a deployment's drain loop."""


def drains_elected(log: EventLog, key: int = DRAINS_LOCK_KEY) -> bool:
    """Return whether a session on this database holds the drains' advisory lock
    (some process runs the elected drains: this one, or another, such as the drain
    process of ``serve``)."""
    with read_transaction(log.datastore) as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
            " WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database()"
            " AND l.classid = %s AND l.objid = %s) AS held",
            (key >> 32, key & 0xFFFFFFFF),
        )
        row = cur.fetchone()
    return bool(row and row["held"])


class ElectedDrains:
    """Runs the drain loop in exactly one process of those sharing a database.

    Each serving process starts one; they contend for a session-level advisory
    lock (:data:`DRAINS_LOCK_KEY`) on a connection of their own. The holder runs
    a :class:`DrainLoop` and wakes it on every write of any process (the event
    store's ``NOTIFY`` on insert, ``LISTEN``\\ ed on the same connection); the
    others retry every ``retry_s``. When the holder dies, or loses its
    connection, PostgreSQL releases the lock and another process takes over
    within ``retry_s``: the work is in the database, so nothing is lost.
    """

    def __init__(
        self,
        log: EventLog,
        make_loop: Callable[[], DrainLoop],
        *,
        retry_s: float = 1.0,
        key: int = DRAINS_LOCK_KEY,
    ) -> None:
        self.log = log
        self.make_loop = make_loop
        self.retry_s = retry_s
        self.key = key
        self.loop: DrainLoop | None = None
        """The loop while this process holds the lock, else None."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="palimpsest-election", daemon=True)

    def start(self) -> None:
        """Start contending for the drains."""
        self._thread.start()

    def wake(self) -> None:
        """Wake the loop if this process runs it (other processes are woken by NOTIFY)."""
        loop = self.loop
        if loop is not None:
            loop.wake()

    @property
    def running(self) -> bool:
        """Whether this process contends (or drains): ``/readyz`` reports it."""
        return self._thread.is_alive()

    @property
    def owner(self) -> bool:
        """Whether this process runs the drain loop now."""
        return self.loop is not None

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the loop if it runs here, and give the lock back."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        pool = self.log.datastore.pool
        kwargs = pool.kwargs() if callable(pool.kwargs) else pool.kwargs
        params = {k: v for k, v in (kwargs or {}).items() if k != "row_factory"}
        # Named for the process, so an operator (or a test) can see which one drains.
        params["application_name"] = f"palimpsest-drains-{os.getpid()}"
        return psycopg.connect(autocommit=True, connect_timeout=10, **params)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._connect() as conn:
                    if self._elected(conn):
                        self._drain(conn)
            except psycopg.Error as e:
                _log.warning("drain election lost its connection", extra={"error": str(e)})
            self._stop.wait(self.retry_s)

    def _elected(self, conn: psycopg.Connection[tuple[object, ...]]) -> bool:
        while not self._stop.is_set():
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
            if row is not None and row[0]:
                return True
            self._stop.wait(self.retry_s)
        return False

    def _drain(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        recorder = self.log.recorder
        channel = getattr(recorder, "channel_name", None)
        if channel is not None:
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        loop = self.make_loop()
        loop.start()
        self.loop = loop
        _log.info("this process runs the drains")
        try:
            while not self._stop.is_set():
                # Each write wakes the loop as it commits: a pass gathers whatever
                # committed by then. Waking only once ``notifies`` returned held the
                # other processes' writes back until 100 had come, or a second passed.
                for _ in conn.notifies(timeout=self.retry_s, stop_after=100):
                    loop.wake()
                conn.execute("SELECT 1")  # a lost connection (and lock) ends the loop here
        finally:
            self.loop = None
            loop.stop()
