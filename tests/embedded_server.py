"""A test's own embedded PostgreSQL, stopped and started with ``pg_ctl`` (an outage, a
crash), and stopped at the end whoever started it last."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings


@contextmanager
def own_server(data_dir: Path, db_wait_s: float) -> Iterator[Runtime]:
    """Yield a runtime on a new embedded PostgreSQL in ``data_dir`` (whatever
    ``DATABASE_URL`` says); afterwards close it and stop the server: one that
    :func:`start` started again is not pgserver's to stop."""
    try:
        runtime = start_runtime(DatabaseSettings(data_dir=data_dir, db_wait_s=db_wait_s))
    except PalimpsestError as e:
        pytest.fail(f"could not start an embedded PostgreSQL of its own: {e}")
    try:
        yield runtime
    finally:
        runtime.close()
        with contextlib.suppress(subprocess.CalledProcessError):  # stopped already
            stop(runtime)


def pg_ctl(runtime: Runtime, *args: str) -> None:
    """Run ``pg_ctl -w args`` on the embedded server of ``runtime``."""
    from pgserver import _commands

    run = _commands.pg_ctl  # type: ignore[attr-defined]  # made at import, per binary
    embedded = runtime.database.embedded
    assert embedded is not None, "a test of its own embedded PostgreSQL, not DATABASE_URL's"
    handle = embedded.handle
    run(["-w", *args], pgdata=handle.pgdata, user=handle.system_user, timeout=60)


def stop(runtime: Runtime, mode: str = "fast") -> None:
    """Stop the server: ``fast`` (an outage) or ``immediate`` (a crash: no checkpoint,
    and what its WAL buffers held is lost)."""
    pg_ctl(runtime, "-m", mode, "stop")


def start(runtime: Runtime) -> None:
    """Start the server again where it listened (recovering, after a crash)."""
    embedded = runtime.database.embedded
    assert embedded is not None
    log = embedded.handle.log
    pg_ctl(runtime, "-o", '-h ""', "-o", f"-k {embedded.socket_dir}", "-l", str(log), "start")
