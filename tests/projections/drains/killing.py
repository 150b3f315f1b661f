"""Killing a drain for real, inside its write transaction, at a point the test chooses.

The test holds a row lock (as the owner) on a row the drain's write updates;
the drain, a subprocess, runs until its write blocks there, with its events
inserted and the events table locked, and its COMMIT not sent. The test sees
it blocked (``pg_stat_activity``: waiting on a lock, no clock involved),
SIGKILLs it, then releases the row. The server rolls the orphaned
transaction back.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, LiteralString
from uuid import UUID

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE

__all__ = ["database_url", "drain_owners", "drain_process", "held_rows", "kill_mid_write"]

_BOOT = """
import sys
from palimpsest.projections.store.database import open_database
from palimpsest.projections.runtime import table_writers
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.settings import DatabaseSettings
settings = DatabaseSettings()
log = EventLog(env=open_database(settings).event_store_env(settings), writers=table_writers())
exec(sys.argv[1])
"""


_STDERR: dict[int, str] = {}
"""Where each drain subprocess's stderr goes, by pid."""


@contextmanager
def held_rows(
    runtime: Runtime, tenant_id: UUID, query: LiteralString, params: tuple[Any, ...]
) -> Iterator[None]:
    """Hold the row locks of ``query`` (``SELECT ... FOR UPDATE``, or an uncommitted
    ``INSERT ... RETURNING`` that a conflicting insert waits for; ``{schema}`` filled
    in) until exit, as the owner. The owner may bypass row-level security (the
    embedded one is a superuser): ``query`` names its rows by key, never by a
    filter that RLS would narrow."""
    with runtime.database.owner_connection() as conn:
        conn.execute("SELECT set_config('palimpsest.tenant_id', %s, true)", (str(tenant_id),))
        rows = conn.execute(query.format(schema=f'"{runtime.database.schema}"'), params).fetchall()
        assert rows, "nothing to hold"  # (an INSERT ... RETURNING holds its new row)
        try:
            yield
        finally:
            conn.rollback()


def drain_owners(runtime: Runtime) -> list[int]:
    """The OS pids of the processes holding the drains' advisory lock (each names its
    connection ``palimpsest-drains-<pid>``)."""
    from palimpsest.projections.drains.loop import DRAINS_LOCK_KEY

    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.application_name FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted"
            " AND l.classid = %s AND l.objid = %s AND a.datname = current_database()",
            (DRAINS_LOCK_KEY >> 32, DRAINS_LOCK_KEY & 0xFFFFFFFF),
        ).fetchall()
    return [int(str(name).rsplit("-", 1)[1]) for (name,) in rows]


def database_url(runtime: Runtime) -> str:
    """Return the owner's URL of the test's database, for a subprocess."""
    database = runtime.database
    return (
        f"postgresql://{database.owner_user}:{database.owner_password}@/{database.dbname}"
        f"?host={database.host}&port={database.port}"
    )


def _blocked_writer(
    runtime: Runtime, table: str, process: subprocess.Popen[bytes], timeout_s: float
) -> int:
    """Return the backend of the drain waiting on a lock in a statement on ``table``."""
    deadline = time.monotonic() + timeout_s
    with runtime.database.owner_connection(autocommit=True) as conn:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = _STDERR.get(process.pid)
                tail = Path(log).read_text(errors="replace")[-3000:] if log else ""
                msg = f"the drain exited ({process.returncode}) before it blocked:\n{tail}"
                raise AssertionError(msg)
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock'"
                " AND state = 'active' AND query LIKE %s AND pid <> pg_backend_pid()",
                (f"%{table}%",),
            ).fetchone()
            if row is not None:
                return int(row[0])
            time.sleep(0.05)
        activity = conn.execute(
            "SELECT pid, state, wait_event_type, wait_event, left(query, 200)"
            " FROM pg_stat_activity WHERE datname = current_database()"
            " AND state <> 'idle' AND pid <> pg_backend_pid()"
        ).fetchall()
    msg = f"no drain blocked on {table} within {timeout_s} s: {activity}"
    raise AssertionError(msg)


def _holds_events_lock(runtime: Runtime, pid: int) -> bool:
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = %s AND granted"
            " AND mode = 'ExclusiveLock' AND relation = %s::regclass",
            (pid, f'"{schema}"."{EVENTS_TABLE}"'),
        ).fetchone()
    return bool(row and row[0])


def _wait_gone(runtime: Runtime, pid: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    with runtime.database.owner_connection(autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                time.sleep(0.05)
                continue
            return
    msg = f"backend {pid} of the killed drain is still there"
    raise AssertionError(msg)


def drain_process(runtime: Runtime, code: str) -> subprocess.Popen[bytes]:
    """Start ``code`` (with ``log``, the event log, in scope) in a subprocess of its
    own session, on the test's database."""
    # Its stderr goes to a file (a pipe nobody reads could fill and stall it), shown
    # if the test fails.
    with tempfile.NamedTemporaryFile(
        prefix="palimpsest-drain-", suffix=".log", delete=False
    ) as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, code],
            env={**os.environ, "DATABASE_URL": database_url(runtime)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    _STDERR[process.pid] = stderr.name
    return process


def kill_mid_write(
    runtime: Runtime,
    tenant_id: UUID,
    *,
    start: Callable[[], subprocess.Popen[bytes]],
    hold: LiteralString,
    params: tuple[Any, ...],
    table: str,
    holds_events_lock: bool = True,
) -> None:
    """Start a drain (``start``, a subprocess in a session of its own) while the rows of
    ``hold`` are locked, wait until its write blocks on ``table`` inside its
    transaction, SIGKILL its process group there, release the rows, and return once
    the killed write's backend is gone (its transaction over: rolled back, or
    committed whole when the process had sent its ``COMMIT`` with the rest, as a
    pipelined transaction does: store/_pipelined.py).

    With ``holds_events_lock``, the write must hold the events-table lock when it is
    killed (an event-log write, its events inserted).
    """
    with held_rows(runtime, tenant_id, hold, params):
        process = start()
        try:
            pid = _blocked_writer(runtime, table, process, timeout_s=300)
            if holds_events_lock:
                assert _holds_events_lock(runtime, pid), "the drain is not inside its write"
            assert process.poll() is None
        except BaseException:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        os.killpg(process.pid, signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    _wait_gone(runtime, pid)
