"""Stop and start a test's own embedded PostgreSQL with ``pg_ctl`` (an outage, a crash)."""

from __future__ import annotations

from projections.runtime import Runtime


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
