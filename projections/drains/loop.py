"""The in-process drain loop that embedded ``serve`` runs beside the HTTP server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from projections.drains.expiry import expire_due
from projections.drains.retention import apply_retention
from projections.drains.revision import LEASE_SECONDS, drain_revisions
from projections.drains.tenant_erasure import erase_deleted_tenants
from projections.recall.embedders import Embedder
from projections.recall.indexing import index_pending
from projections.store.eventlog import EventLog

__all__ = ["DrainLoop"]

_log = logging.getLogger(__name__)


class DrainLoop:
    """Drains in a background thread of this process (the embedded default).

    ``wake()`` is the hint a write sends after it commits; the loop also
    sweeps every ``sweep_s`` seconds, so a hint that never came only delays
    work. Each pass first applies retention, expires observations whose
    retention deadline has passed (by ``clock``) and erases deleted tenants,
    then drains revisions until nothing is left to claim, then (with an
    ``embedder``) embeds the current versions recall has not indexed yet.
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
    ) -> None:
        self.log = log
        self.embedder = embedder
        self.clock = clock
        self.lease_s = lease_s
        self.sweep_s = sweep_s
        self.batch = batch
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

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the current batch and stop."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

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
        while not self._stop.is_set():
            self._wake.wait(self.sweep_s)
            self._wake.clear()
            try:
                # Shorter deadlines first: expiry then sees them in the same sweep.
                apply_retention(self.log, now=self.clock(), limit=self.batch)
                expire_due(self.log, now=self.clock(), limit=self.batch)
                while not self._stop.is_set() and erase_deleted_tenants(self.log, limit=self.batch):
                    pass
                while (
                    not self._stop.is_set()
                    and drain_revisions(self.log, limit=self.batch, lease_s=self.lease_s).claimed
                ):
                    pass
                # Embedding follows publication: it reads the published current version.
                while not self._stop.is_set() and self.embedder is not None:
                    done = index_pending(self.log, self.embedder, limit=self.batch)
                    if not (done.embedded or done.marked):
                        break
            except Exception:
                # The loop must outlive a database restart; the work stays in
                # the database and the next pass retries it.
                _log.exception("drain pass failed; retrying at the next sweep")
