"""The embedded PostgreSQL (pgserver: PostgreSQL 16 + pgvector) in a data directory."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from palimpsest.projections.store.errors import DatabaseUnavailableError, DataDirectoryInUseError

__all__ = ["EmbeddedServer", "EmbeddedWatch", "ServeLock", "postmaster_pid", "start_embedded"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedServer:
    """A running embedded PostgreSQL: where its socket is, and the handle keeping it up."""

    socket_dir: str
    port: int
    handle: Any


def _prune_dead_handles(pgdata: Path) -> None:
    """Forget handles of processes that died without cleaning up.

    pgserver stops the server when the last attached process exits, but a
    process killed by SIGKILL never removes its pid from ``.handle_pids.json``,
    and then nobody ever stops the server (research/stack.md §1.1).
    """
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (FileNotFoundError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


_TUNING_FILE = "palimpsest.conf"
_INCLUDE = f"include_if_exists = '{_TUNING_FILE}'\n"


def _tune(pgdata: Path, shared_buffers_mb: int) -> bool:
    """Write the server settings palimpsest wants; return whether they changed.

    pgserver's initdb leaves PostgreSQL's defaults (128 MB of shared buffers),
    which recall's HNSW index outgrows at about 30,000 memories: its inserts
    then cost twice as much. The settings live in their own file, included
    from ``postgresql.conf``, and take effect when the server (re)starts.
    """
    conf = pgdata / "postgresql.conf"
    if not conf.exists():
        return False
    text = conf.read_text()
    if _INCLUDE not in text:
        conf.write_text(text + "\n" + _INCLUDE)
    tuning = pgdata / _TUNING_FILE
    wanted = (
        "# Written by palimpsest (PALIMPSEST_EMBEDDED_SHARED_BUFFERS_MB); edits are overwritten.\n"
        f"shared_buffers = '{shared_buffers_mb}MB'\n"
        "maintenance_work_mem = '256MB'\n"
    )
    if tuning.exists() and tuning.read_text() == wanted:
        return False
    tuning.write_text(wanted)
    return True


def start_embedded(data_dir: Path, shared_buffers_mb: int = 512) -> EmbeddedServer:
    """Start (or attach to) the embedded PostgreSQL under ``data_dir/pgdata``.

    A second process on the same directory attaches to the running server;
    the server stops when the last attached process exits. Settings written
    for a server that was already running apply at its next start, except
    right after the data directory is created, when it restarts at once.

    Raises:
        DatabaseUnavailableError: pgserver could not initialise or start it.
    """
    import pgserver  # imported here: it starts nothing, but it is slow to import

    pgdata = data_dir / "pgdata"
    data_dir.mkdir(parents=True, exist_ok=True)
    _prune_dead_handles(pgdata)
    fresh = not (pgdata / "PG_VERSION").exists()
    _tune(pgdata, shared_buffers_mb)
    try:
        handle = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        if fresh and _tune(pgdata, shared_buffers_mb):
            handle.cleanup()  # stops the server initdb just made: nobody else uses it
            handle = pgserver.get_server(pgdata, cleanup_mode="stop")  # type: ignore[attr-defined]
        info = handle.get_postmaster_info()
    except Exception as e:  # pgserver raises bare subprocess and OS errors
        log_file = pgdata / "log"
        msg = f"could not start the embedded PostgreSQL in {pgdata} ({e}); see {log_file}"
        raise DatabaseUnavailableError(msg) from e
    _log.info("embedded postgres ready", extra={"pgdata": str(pgdata), "port": info.port})
    return EmbeddedServer(socket_dir=str(info.socket_dir), port=int(info.port), handle=handle)


class ServeLock:
    """An exclusive claim on a data directory by one ``palimpsest serve``.

    Two servers on one directory would both run in-process drains and fight
    over the HTTP port; the second is refused. Other commands (``migrate``,
    ``tenant create``) attach to the running database without this lock.
    The lock is an ``flock``, so the kernel releases it when the process dies.
    """

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "serve.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock.

        Raises:
            DataDirectoryInUseError: another process holds it.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            msg = (
                f"data directory {self.path.parent} is in use by another palimpsest serve "
                f"(pid {holder}); stop it, or pass a different --data-dir"
            )
            raise DataDirectoryInUseError(msg) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def release(self) -> None:
        """Release the lock if held."""
        if self._file is not None:
            fcntl.flock(self._file, fcntl.LOCK_UN)
            self._file.close()
            self._file = None


def postmaster_pid(pgdata: Path) -> int | None:
    """Return the pid of the PostgreSQL server running on ``pgdata``, or None when none
    runs (no ``postmaster.pid``, or its process is gone: killed, or a zombie)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None
    try:
        alive = psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return None
    return pid if alive else None


class EmbeddedWatch:
    """Watches the embedded PostgreSQL ``serve`` started, and starts it again when it
    stops (killed, crashed, stopped by hand): each ``interval_s`` it looks for the
    server's process; when it is gone, it starts it again where it listened, waiting
    ``first_wait_s`` after a failed start, doubling up to ``longest_wait_s``, each
    attempt one structured log line. After ``attempts`` failed starts in a row it is
    :attr:`failed` (``/healthz`` answers 503: only a restart of the service, or of
    its machine, can help) and goes on trying at the longest wait; a start that
    succeeds ends it. The work in flight meanwhile fails as in any outage: writes
    answer 503 and their clients retry.
    """

    def __init__(
        self,
        server: EmbeddedServer,
        *,
        attempts: int = 5,
        interval_s: float = 1.0,
        first_wait_s: float = 1.0,
        longest_wait_s: float = 30.0,
        marker: Path | None = None,
    ) -> None:
        self.server = server
        self.attempts = attempts
        self.interval_s = interval_s
        self.first_wait_s = first_wait_s
        self.longest_wait_s = longest_wait_s
        self.marker = marker
        """A file that exists while :attr:`failed` (for processes that share the server
        but not this one's memory: ``serve --workers N``'s HTTP processes)."""
        self.restarts = 0
        """Servers started again so far."""
        self._failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="palimpsest-embedded-watch", daemon=True
        )

    @property
    def pgdata(self) -> Path:
        """The watched server's data directory."""
        return Path(self.server.handle.pgdata)

    @property
    def failed(self) -> bool:
        """Whether the last ``attempts`` starts in a row failed (and none since worked)."""
        return self.attempts <= self._failures

    def start(self) -> EmbeddedWatch:
        """Start watching (a marker a previous process left is removed)."""
        self._mark(failed=False)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop watching (before the server is stopped on purpose)."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            if postmaster_pid(self.pgdata) is None:
                self._restart()

    def _restart(self) -> None:
        down_at = time.monotonic()
        wait_s = self.first_wait_s
        _log.warning(
            "embedded postgres is down: starting it again", extra={"pgdata": str(self.pgdata)}
        )
        while not self._stop.is_set():
            try:
                self._start_server()
            except Exception as e:  # pgserver raises bare subprocess, OS and assertion errors
                self._failures += 1
                _log.error(
                    "embedded postgres did not start",
                    extra={
                        "pgdata": str(self.pgdata),
                        "attempt": self._failures,
                        "retry_in_s": wait_s,
                        "error": f"{type(e).__name__}: {e}"[:200],
                    },
                )
                if self._failures == self.attempts:
                    _log.critical(
                        "embedded postgres cannot be started: liveness fails",
                        extra={"pgdata": str(self.pgdata), "attempts": self._failures},
                    )
                    self._mark(failed=True)
                self._stop.wait(wait_s)
                wait_s = min(wait_s * 2, self.longest_wait_s)
            else:
                self.restarts += 1
                _log.warning(
                    "embedded postgres started again",
                    extra={
                        "pgdata": str(self.pgdata),
                        "attempts": self._failures + 1,
                        "down_s": round(time.monotonic() - down_at, 3),
                    },
                )
                self._failures = 0
                self._mark(failed=False)
                return

    def _start_server(self) -> None:
        handle = self.server.handle
        # pgserver's own start, under its lock (other processes attaching to the data
        # directory start it too): the same socket directory, so every connection
        # setting stays true, and the handle records the new server, which it stops
        # at exit as it would have the first.
        with handle._lock:
            handle.ensure_postgres_running()
        if postmaster_pid(self.pgdata) is None:
            msg = "the server exited as it started"
            raise RuntimeError(msg)

    def _mark(self, *, failed: bool) -> None:
        if self.marker is None:
            return
        if failed:
            self.marker.write_text("the embedded PostgreSQL could not be started again\n")
        else:
            self.marker.unlink(missing_ok=True)
