"""``palimpsest serve``: lock the data directory, migrate, start the drains (in the
one process elected, or in a process of their own), serve HTTP from one process or
``--workers N``."""

from __future__ import annotations

import atexit
import gc
import logging
import multiprocessing
import multiprocessing.process
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from palimpsest.api.cli._admin import admin_token_path
from palimpsest.api.cli._console import report
from palimpsest.api.cli._exit_code import EXIT_OK, EXIT_USAGE
from palimpsest.api.cli._preflight import claim_directory_and_port, refused_settings
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.decay_cycle import ScheduledCycle
from palimpsest.projections.drains.forgetting_pass import ScheduledPass
from palimpsest.projections.drains.hints import broker_for, send_drain_hint
from palimpsest.projections.drains.loop import DrainLoop, ElectedDrains, PeriodicJob, drains_elected
from palimpsest.projections.drains.settings import DrainSettings, ForgettingPassSettings
from palimpsest.projections.history.log_scan import log_head
from palimpsest.projections.judgment.settings import JudgeSettings, judge_from
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.embedded import EmbeddedWatch
from palimpsest.projections.store.eventlog import SERVING_GROUPS_AHEAD

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from fastapi import FastAPI

    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.runtime import Runtime
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["DRAIN_NICENESS", "run_drains", "run_serve", "worker_app"]

_log = logging.getLogger("palimpsest.cli")
_RETRY_LOAD_S = (1.0, 60.0)
"""The first and the longest wait between attempts to load the embedder."""

_RESTART_S = (1.0, 60.0)
"""The first and the longest wait before the drain process is started again."""

DRAIN_NICENESS = 10
"""How much lower the drain process's CPU priority is than ``serve``'s (``nice``)."""

EMBEDDED_DOWN_FILE = "embedded-down"
"""The file in the data directory that exists while ``serve`` cannot start the embedded
PostgreSQL again: every HTTP process's ``/healthz`` answers 503 meanwhile."""


def run_serve(db: DatabaseSettings, api: ApiSettings) -> int:
    """Serve HTTP until stopped; an embedded data directory is locked to this process.

    With ``palimpsest.api.workers`` above 1, this process starts (and migrates) the database,
    then uvicorn runs that many HTTP processes on the one port, each with its
    own runtime (:func:`worker_app`); one of them, elected, runs the drains. With
    ``PALIMPSEST_DRAIN_PROCESS``, none does: a process of their own runs them
    (:func:`run_drains`), started and watched by this one.

    Refused before anything is written or started (exit 2, one line): an invalid
    setting of any room, a local MCP token on a host that is not loopback, a port
    that is in use.

    Raises:
        pydantic.ValidationError: a setting is invalid.
        DataDirectoryInUseError: another ``serve`` holds the data directory.
        DatabaseUnavailableError: the database cannot be reached.
        ConfigurationError: the local embedder is chosen without its extra.
    """
    import uvicorn

    refused = refused_settings(db, api)
    if refused is not None:
        report(f"palimpsest: error: {refused}")
        return EXIT_USAGE
    apart_drains = _drains_apart()  # a bad PALIMPSEST_DRAIN_PROCESS too
    if apart_drains:
        # What the drain process would read, read here: a bad setting stops serve
        # with its one line, not a child dying again and again.
        _daily_job_settings()

    lock, refused = claim_directory_and_port(db, api)
    if refused is not None:
        report(f"palimpsest: error: {refused}")
        return EXIT_USAGE
    # SIGTERM must run atexit handlers, or the embedded PostgreSQL outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    apart: _DrainProcess | None = None
    try:
        runtime = start_runtime(db, progress=_log.info)
        watch = _watch_embedded(runtime, api, db.data_dir)
        try:
            if db.embedded:
                _bootstrap_default_tenant(runtime, db.data_dir)
                # Other processes (HTTP workers, the drain process) attach to the
                # embedded server this one keeps up, reading the environment.
                os.environ["PALIMPSEST_DATA_DIR"] = str(db.data_dir)
            if apart_drains:
                apart = _DrainProcess().start()
            _log.info(
                "serving",
                extra={
                    "host": api.host,
                    "port": api.port,
                    "workers": api.workers,
                    "embedded": db.embedded,
                    "admin_token_file": str(admin_token_path(db.data_dir)) if db.embedded else None,
                },
            )
            if api.workers > 1:
                # The workers read their settings from the environment, as this did.
                uvicorn.run(
                    "palimpsest.api.cli._serve:worker_app",
                    factory=True,
                    host=api.host,
                    port=api.port,
                    workers=api.workers,
                    log_config=None,
                    access_log=False,
                )
                return EXIT_OK
            alive = None if watch is None else (lambda: not watch.failed)
            with _Worker(runtime, api, apart, alive) as worker:
                uvicorn.run(
                    worker.app,
                    host=api.host,
                    port=api.port,
                    log_config=None,
                    access_log=False,
                )
        finally:
            if watch is not None:  # before the server is stopped on purpose
                watch.stop()
            if apart is not None:
                apart.stop()
            runtime.close()
    finally:
        if lock is not None:
            lock.release()
    return EXIT_OK


def worker_app() -> FastAPI:
    """Return the app of one of ``serve --workers N``'s processes (uvicorn's factory):
    its own runtime on the database the first process started, and its own bid for
    the drains (none with ``PALIMPSEST_DRAIN_PROCESS``). Both end when the process
    exits."""
    from palimpsest.api._logformat import configure_logging
    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

    api = ApiSettings()
    configure_logging(api.log_level)
    db = DatabaseSettings()
    runtime = start_runtime(db)
    # The first process watches the embedded server; it says here when it gave up.
    down = db.data_dir / EMBEDDED_DOWN_FILE
    alive = (lambda: not down.exists()) if db.embedded else None
    worker = _Worker(runtime, api, alive=alive).__enter__()

    def close() -> None:
        worker.__exit__(None, None, None)
        runtime.close()

    atexit.register(close)
    return worker.app


class _Worker:
    """One serving process's parts besides the database: the embedder's loader, the
    drains beside it (:class:`_DrainJobs`; none when they run in a process of their
    own), and the app."""

    def __init__(
        self,
        runtime: Runtime,
        api: ApiSettings,
        apart: _DrainProcess | None = None,
        alive: Callable[[], bool] | None = None,
    ) -> None:
        from palimpsest.api.app import create_app

        runtime.log.group.ahead = SERVING_GROUPS_AHEAD
        self.loader = _EmbedderLoader(runtime)
        self.jobs = None if _drains_apart() else _DrainJobs(runtime, api)
        if self.jobs is None:
            # The drain process hears each write through the log's NOTIFY: no hint to
            # send, but drains run, so a write may wait for its embedding. /readyz
            # sees the process when this one watches it (``apart``); an HTTP process
            # of ``--workers N`` sees whether it holds the drains' lock.
            wake: Callable[[], None] = _no_hint
            running: Callable[[], bool] | None = (
                partial(drains_elected, runtime.log) if apart is None else lambda: apart.running
            )
        else:
            wake, drains = self.jobs.wake, self.jobs.drains
            running = None if drains is None else (lambda: drains.running)
        self.app = create_app(api, runtime, wake, drains_running=running)
        # ``/healthz`` answers 503 once this is false (None: always alive).
        self.app.state.liveness = alive
        # With a broker, ``/readyz`` says ``stalled`` when no worker beat for this long.
        self.app.state.drain_stall_s = DrainSettings().drain_stall_s

    def __enter__(self) -> _Worker:
        # Everything loaded so far lives as long as the process: moving it out
        # of the collector's reach keeps full collections short. Without it,
        # they added 30-40 ms to the slowest 1% of as-of reads of long memories.
        gc.freeze()
        return self

    def __exit__(self, *_: object) -> None:
        self.loader.stop()
        if self.jobs is not None:
            self.jobs.stop()


def _no_hint() -> None:
    """The wake-up hint of a process whose writes the drains hear through NOTIFY."""


class _DrainJobs:
    """A process's bid for the drains (:class:`ElectedDrains`) and the daily jobs run
    beside them; with a broker, none here (the workers run them) and each write
    sends a hint instead."""

    def __init__(self, runtime: Runtime, api: ApiSettings) -> None:
        self.drains, self.wake = _drains(runtime)
        self.scheduled = _scheduled_pass(runtime, api) if self.drains is not None else None
        self.cycles = _scheduled_cycles(runtime, api) if self.drains is not None else None

    def stop(self) -> None:
        """Stop the daily jobs, then the drains (and give their lock back)."""
        if self.scheduled is not None:
            self.scheduled.stop()
        if self.cycles is not None:
            self.cycles.stop()
        if self.drains is not None:
            self.drains.stop()


def _daily_job_settings() -> None:
    """Read the settings of the daily jobs the drains run beside them (raising, for
    ``serve`` to report, what is wrong with them)."""
    if ForgettingPassSettings().forgetting_pass_enabled:
        judge_from(JudgeSettings())


def _drains_apart() -> bool:
    """Whether ``serve`` runs the drains in a process of their own
    (``PALIMPSEST_DRAIN_PROCESS``, without ``BROKER_URL``)."""
    settings = DrainSettings()
    return settings.drain_process and settings.broker_url is None


class _DrainProcess:
    """Runs :func:`run_drains` in a child process (spawned, as uvicorn's workers are),
    and starts another when it dies, until stopped. The drains' election makes one
    drain at a time whatever happens: a child that outlives this process (killed
    with SIGKILL) exits once it sees its parent gone."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._supervise, name="palimpsest-drain-process", daemon=True
        )
        self.process: multiprocessing.process.BaseProcess | None = None

    @property
    def running(self) -> bool:
        """Whether a drain process is alive now (``/readyz`` reports it)."""
        process = self.process
        return process is not None and process.is_alive()

    def start(self) -> _DrainProcess:
        """Start the child, and watch it."""
        self._thread.start()
        return self

    def _supervise(self) -> None:
        spawn = multiprocessing.get_context("spawn")
        wait_s, longest_s = _RESTART_S
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                # A daemon: multiprocessing terminates it at exit, whatever
                # interrupted this process's own shutdown.
                process = spawn.Process(
                    target=run_drains, args=(os.getpid(),), name="drains", daemon=True
                )
                process.start()
            except Exception:
                _log.exception("drain process could not start", extra={"retry_s": wait_s})
            else:
                self.process = process
                _log.info("drain process started", extra={"pid": process.pid})
                while process.is_alive() and not self._stop.is_set():
                    process.join(0.5)
                if self._stop.is_set():
                    return
                _log.warning(
                    "drain process exited, starting another",
                    extra={"pid": process.pid, "exitcode": process.exitcode, "retry_s": wait_s},
                )
            # One that keeps dying early (the database unreachable, say) is started
            # again less and less often; one that ran a while, at once.
            if time.monotonic() - started > longest_s:
                wait_s = _RESTART_S[0]
            self._stop.wait(wait_s)
            wait_s = min(wait_s * 2, longest_s)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the child (SIGTERM: it finishes its batch and gives the lock back)."""
        self._stop.set()
        self._thread.join(timeout_s)
        process = self.process
        if process is None:
            return
        try:
            if process.is_alive():
                process.terminate()
                process.join(timeout_s)
        finally:
            if process.is_alive():
                process.kill()
                process.join(timeout_s)


def run_drains(parent_pid: int) -> None:
    """The drain process of ``serve`` (``PALIMPSEST_DRAIN_PROCESS``): its own runtime,
    on the database ``serve`` started, the elected drains and the daily jobs, until
    SIGTERM or until its parent is gone. It serves no HTTP."""
    from palimpsest.api._logformat import configure_logging
    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

    api = ApiSettings()
    configure_logging(api.log_level)
    # Requests first: where every core is busy, the drains take what the serving
    # processes leave (published revisions lag more, reads answer pending longer,
    # never stale). One client's writes gained 0.01-0.5 ms in 5 pairs of 5
    # (docs/benchmarks.md); nothing else measured moved.
    os.nice(DRAIN_NICENESS)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's ^C is serve's to handle
    runtime = start_runtime(DatabaseSettings())
    loader = _EmbedderLoader(runtime)
    jobs = _DrainJobs(runtime, api)
    gc.freeze()
    try:
        while not stop.wait(1.0):
            if os.getppid() != parent_pid:
                _log.warning("serve is gone: the drain process exits")
                break
    finally:
        jobs.stop()
        loader.stop()
        runtime.close()


def _scheduled_cycles(runtime: Runtime, api: ApiSettings) -> PeriodicJob:
    """Start the decay cycle's schedule beside the in-process drains (the embedded
    default; with a broker, the workers schedule it): each minute it runs the cycle
    of every tenant whose policy enables it and whose slot no process claimed yet."""
    writer = Writer(
        runtime.log,
        CapturePolicy(
            raw_retention=timedelta(hours=api.raw_retention_hours),
            transient_retention=timedelta(hours=api.transient_retention_hours),
        ),
        clock=lambda: datetime.now(UTC),
    )
    job = PeriodicJob(
        "decay-cycle", ScheduledCycle(runtime.log, writer, lambda: runtime.embedder.model_id)
    )
    job.start()
    return job


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


def _watch_embedded(runtime: Runtime, api: ApiSettings, data_dir: Path) -> EmbeddedWatch | None:
    """Watch the embedded PostgreSQL this process started, starting it again if it stops
    (None with ``DATABASE_URL``: that server is its operator's to keep up)."""
    embedded = runtime.database.embedded
    if embedded is None:
        return None
    marker = data_dir / EMBEDDED_DOWN_FILE
    return EmbeddedWatch(embedded, attempts=api.embedded_restart_attempts, marker=marker).start()


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
                runtime = self._runtime
                _log.info(
                    "embedder loaded",
                    # Which runtime, too: unset, the setting picks one (onnxruntime or torch).
                    extra={
                        "model": runtime.embedder.model_id,
                        "embedder": runtime.embedding.chosen_embedder,
                    },
                )
                return

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop retrying, and let a load under way finish: exiting while a thread is
        inside torch's import can abort the interpreter instead of exiting."""
        self._stop.set()
        self._thread.join(timeout_s)


def _drains(runtime: Runtime) -> tuple[ElectedDrains | None, Callable[[], None]]:
    """Return this process's bid for the drain loop (none with BROKER_URL: the
    workers drain) and the wake-up hint a write sends after it commits."""
    drains = DrainSettings()
    if drains.broker_url is not None:
        broker = broker_for(drains.broker_url.get_secret_value())
        return None, lambda: send_drain_hint(broker)
    election = ElectedDrains(
        runtime.log,
        lambda: DrainLoop(
            runtime.log,
            sweep_s=drains.sweep_interval_s,
            batch=drains.drain_batch,
            lease_s=drains.drain_lease_s,
            embedder=runtime.embedder,
        ),
    )
    election.start()
    return election, election.wake
