"""The in-process drain loop that embedded ``serve`` runs beside the HTTP server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from projections.drains.isolation import Backoff
from projections.drains.revision import LEASE_SECONDS
from projections.drains.stages import drain_stages, run_pass
from projections.recall.embedders import Embedder
from projections.store.eventlog import EventLog

__all__ = ["DrainLoop", "PeriodicJob"]

_log = logging.getLogger(__name__)


class DrainLoop:
    """Drains in a background thread of this process (the embedded default).

    ``wake()`` is the hint a write sends after it commits; the loop also
    sweeps every ``sweep_s`` seconds, so a hint that never came only delays
    work. Each pass runs the stages of :func:`projections.drains.stages.drain_stages`
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
        for stage in self.stages:
            widen = first
            while not self._stop.is_set():
                did = run_pass(stage, self.backoff, first=widen)
                widen = False
                if not (stage.repeat and did):
                    break

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
