"""``palimpsest mcp``: the MCP server over stdin and stdout, for one local agent.

It opens the store itself (the same settings as ``serve``: an embedded data
directory or ``DATABASE_URL``), rather than calling a running service: a
desktop client can start it with nothing else running, and its tools call the
command and view layer directly, as ``/mcp`` does. It acts as the token in
``PALIMPSEST_TOKEN`` (authenticated at start, and again on every call). Like
``serve`` it runs the drains in-process (with ``PALIMPSEST_BROKER_URL``, it
sends the workers hints instead), so its writes become current and recallable
on their own; beside a running ``serve`` both drain, each claiming its own work.

stdout is the protocol and nothing else: logs go to stderr, and while the
store opens (the embedded server's tools may print) and closes, file
descriptor 1 points at stderr too.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio

from palimpsest.api._deps import get_caller
from palimpsest.api.cli._console import report
from palimpsest.api.cli._every_setting import read_every_setting
from palimpsest.api.cli._exit_code import EXIT_OK, EXIT_USAGE
from palimpsest.api.cli._store import missing_store
from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._server import build_server
from palimpsest.api.mcp._settings import McpSettings
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.hints import broker_for, send_drain_hint
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.drains.settings import DrainSettings
from palimpsest.projections.runtime import Runtime, start_runtime

if TYPE_CHECKING:
    from palimpsest.api._settings import ApiSettings
    from palimpsest.projections.store.settings import DatabaseSettings

__all__ = ["TOKEN_VARIABLE", "run_mcp"]

_log = logging.getLogger("palimpsest.mcp")

TOKEN_VARIABLE = "PALIMPSEST_TOKEN"


def run_mcp(db: DatabaseSettings, api: ApiSettings) -> int:
    """Serve the MCP tools over stdio until stdin closes.

    Refused (exit 2, one line) without ``PALIMPSEST_TOKEN``, or where ``db`` names no
    store: only ``serve`` and ``migrate`` create one.

    Raises:
        pydantic.ValidationError: a setting is invalid.
        AuthenticationError: ``PALIMPSEST_TOKEN`` is not a known token.
        DatabaseUnavailableError: the database cannot be reached.
    """
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        report(f"palimpsest: error: set {TOKEN_VARIABLE} to a token (palimpsest token create)")
        return EXIT_USAGE
    read_every_setting(db, api)  # an invalid one is its one line, before the store opens
    mcp = McpSettings()
    # SIGTERM (how a client stops a server that outlived stdin) must run atexit
    # handlers and the cleanup below, or the embedded PostgreSQL outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with _stdout_to_stderr():
        # The store must be there already: a desktop client's typo in the data
        # directory must not leave a new store behind it.
        missing = missing_store(db)
        runtime = start_runtime(db) if missing is None else None
    if runtime is None:
        report(f"palimpsest: error: {missing}")
        return EXIT_USAGE
    try:
        get_caller(authenticate(runtime.log, token))  # fail now, not at the first call
        drains, wake = _drains(runtime)
        runtime.load_embedder_soon()  # answer at once; the first recall waits for it
        runtime.publications.start()  # remember's wait for its conflicts awaits its notices
        clock: Callable[[], datetime] = lambda: datetime.now(UTC)  # noqa: E731
        writer = Writer(
            runtime.log,
            CapturePolicy(
                raw_retention=timedelta(hours=api.raw_retention_hours),
                transient_retention=timedelta(hours=api.transient_retention_hours),
            ),
            clock=clock,
        )
        backend = Backend(
            runtime=runtime,
            writer=writer,
            wake=wake,
            clock=clock,
            token=token,
            token_cache_s=api.token_cache_s,
            drains=True,  # in this process, or the workers the broker's hints wake
            conflict_wait_s=mcp.conflict_wait_s,
        )
        server = build_server(backend, admin_tools=mcp.admin_tools)
        _log.info("serving MCP over stdio", extra={"tenant": "from PALIMPSEST_TOKEN"})
        try:
            anyio.run(server.run_stdio_async)
        finally:
            if drains is not None:
                with _stdout_to_stderr():
                    drains.stop()
    finally:
        with _stdout_to_stderr():
            runtime.close()
    return EXIT_OK


def _drains(runtime: Runtime) -> tuple[DrainLoop | None, Callable[[], None]]:
    """Return the in-process drain loop (none with a broker) and the wake-up hint."""
    settings = DrainSettings()
    if settings.broker_url is not None:
        broker = broker_for(settings.broker_url.get_secret_value())
        return None, lambda: send_drain_hint(broker)
    loop = DrainLoop(
        runtime.log,
        sweep_s=settings.sweep_interval_s,
        batch=settings.drain_batch,
        lease_s=settings.drain_lease_s,
        embedder=runtime.embedder,
    )
    loop.start()
    return loop, loop.wake


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 (and ``sys.stdout``) at stderr for the block: what
    anything prints, or a child process writes, must not reach the protocol."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
