"""``palimpsest serve``: lock the data directory, migrate, start the drains, serve HTTP."""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from api.cli.admin import admin_token_path
from api.cli.exit_code import EXIT_OK
from domain.errors import PalimpsestError
from projections.commands.tokens import create_tenant
from projections.commands.writer import CapturePolicy, Writer
from projections.drains.forgetting_pass import ScheduledPass
from projections.drains.hints import broker_for, send_drain_hint
from projections.drains.loop import DrainLoop, PeriodicJob
from projections.drains.settings import DrainSettings, ForgettingPassSettings
from projections.history.log_scan import log_head
from projections.judgment.settings import JudgeSettings, judge_from
from projections.runtime import start_runtime
from projections.store.embedded import ServeLock

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from api.settings import ApiSettings
    from projections.runtime import Runtime
    from projections.store.settings import DatabaseSettings

__all__ = ["run_serve"]

_log = logging.getLogger("palimpsest.cli")
_RETRY_LOAD_S = (1.0, 60.0)
"""The first and the longest wait between attempts to load the embedder."""


def run_serve(db: DatabaseSettings, api: ApiSettings) -> int:
    """Serve HTTP until stopped; an embedded data directory is locked to this process.

    Raises:
        DataDirectoryInUseError: another ``serve`` holds the data directory.
        DatabaseUnavailableError: the database cannot be reached.
    """
    import uvicorn

    from api.app import create_app

    lock = ServeLock(db.data_dir) if db.embedded else None
    if lock is not None:
        lock.acquire()
    # SIGTERM must run atexit handlers, or the embedded PostgreSQL outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        runtime = start_runtime(db, progress=_log.info)
        try:
            if db.embedded:
                _bootstrap_default_tenant(runtime, db.data_dir)
            loader = _EmbedderLoader(runtime)
            loop, wake = _drains(runtime)
            scheduled = _scheduled_pass(runtime, api) if loop is not None else None
            running = None if loop is None else (lambda: loop.running)
            app = create_app(api, runtime, wake, drains_running=running)
            # Everything loaded so far lives as long as the process: moving it out
            # of the collector's reach keeps full collections short. Without it,
            # they added 30-40 ms to the slowest 1% of as-of reads of long memories.
            gc.freeze()
            _log.info(
                "serving",
                extra={
                    "host": api.host,
                    "port": api.port,
                    "embedded": db.embedded,
                    "drains": "broker" if loop is None else "in-process",
                    "admin_token_file": str(admin_token_path(db.data_dir)) if db.embedded else None,
                },
            )
            try:
                uvicorn.run(app, host=api.host, port=api.port, log_config=None, access_log=False)
            finally:
                loader.stop()
                if scheduled is not None:
                    scheduled.stop()
                if loop is not None:
                    loop.stop()
        finally:
            runtime.close()
    finally:
        if lock is not None:
            lock.release()
    return EXIT_OK


def _scheduled_pass(runtime: Runtime, api: ApiSettings) -> PeriodicJob | None:
    """Start the daily forgetting pass beside the in-process drains (the embedded
    default; with a broker, the workers schedule it): None when it is off."""
    settings = ForgettingPassSettings()
    if not settings.forgetting_pass_enabled:
        return None
    judge = judge_from(JudgeSettings())
    if judge is None:
        _log.warning("forgetting pass enabled without a judge: no pass runs")
        return None
    writer = Writer(
        runtime.log,
        CapturePolicy(
            raw_retention=timedelta(hours=api.raw_retention_hours),
            transient_retention=timedelta(hours=api.transient_retention_hours),
        ),
        clock=lambda: datetime.now(UTC),
    )
    job = PeriodicJob(
        "forgetting-pass",
        ScheduledPass(runtime.log, writer, judge, settings, lambda: runtime.embedder.model_id),
    )
    job.start()
    return job


def _bootstrap_default_tenant(runtime: Runtime, data_dir: Path) -> None:
    """On the first serve of an empty embedded store, create tenant ``default``."""
    token_file = admin_token_path(data_dir)
    with runtime.database.owner_connection() as conn, conn.cursor() as cur:
        head = log_head(cur, runtime.database.schema)
    if token_file.exists() or head > 0:
        return
    issued = create_tenant(runtime.log, "default")
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(issued.token + "\n")
    print(f"created tenant 'default' ({issued.tenant_id})", file=sys.stderr)
    print(f"admin token (shown once, also saved to {token_file}):", file=sys.stderr)
    print(issued.token, file=sys.stderr)


class _EmbedderLoader:
    """Loads the embedder in the background, retrying with growing waits until it
    loads (``/readyz`` is not ready until then)."""

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._load, name="palimpsest-embedder-load", daemon=True
        )
        self._thread.start()

    def _load(self) -> None:
        wait_s, longest_s = _RETRY_LOAD_S
        while not self._stop.is_set():
            try:
                self._runtime.load_embedder()
            except PalimpsestError as e:
                _log.warning("embedder not loaded", extra={"error": str(e), "retry_s": wait_s})
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, longest_s)
            else:
                _log.info("embedder loaded", extra={"model": self._runtime.embedder.model_id})
                return

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop retrying, and let a load under way finish: exiting while a thread is
        inside torch's import can abort the interpreter instead of exiting."""
        self._stop.set()
        self._thread.join(timeout_s)


def _drains(runtime: Runtime) -> tuple[DrainLoop | None, Callable[[], None]]:
    """Return the in-process drain loop (none with BROKER_URL) and the wake-up hint."""
    drains = DrainSettings()
    if drains.broker_url is not None:
        broker = broker_for(drains.broker_url.get_secret_value())
        return None, lambda: send_drain_hint(broker)
    loop = DrainLoop(
        runtime.log,
        sweep_s=drains.sweep_interval_s,
        batch=drains.drain_batch,
        lease_s=drains.drain_lease_s,
        embedder=runtime.embedder,
    )
    loop.start()
    return loop, loop.wake
