"""A real server for the client's tests: the app on uvicorn, on loopback, over the
session's runtime and PostgreSQL; and one whose drains run as ``palimpsest serve``
runs them (the MCP tests use it too)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.drains.settings import DrainSettings
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.conftest import drain_until_caught_up, index_until_caught_up


@pytest.fixture(scope="session")
def base_url(runtime: Runtime) -> Iterator[str]:
    with live_server(create_app(ApiSettings(), runtime)) as url:
        yield url


def drain_soon(runtime: Runtime, delay_s: float = 0.3) -> threading.Thread:
    """Drain revisions in a thread after ``delay_s`` (while a read waits for them)."""

    def later() -> None:
        time.sleep(delay_s)
        drain_until_caught_up(runtime)

    thread = threading.Thread(target=later, daemon=True)
    thread.start()
    return thread


@contextmanager
def served_with_drains(runtime: Runtime) -> Iterator[str]:
    """Serve the app on loopback with its drains in a background loop, woken by every
    write and sweeping as configured, and the model loaded, as ``palimpsest serve``
    runs them; yield its base URL."""
    runtime.load_embedder()
    # From rest, as a service that has been running: the session's store holds every
    # earlier test's writes, and a backlog left to the drains would delay the first
    # test's own write by however many came before it in this process.
    index_until_caught_up(runtime)
    settings = DrainSettings()
    drains = DrainLoop(
        runtime.log,
        sweep_s=settings.sweep_interval_s,
        batch=settings.drain_batch,
        lease_s=settings.drain_lease_s,
        embedder=runtime.embedder,
    )
    drains.start()
    try:
        with live_server(create_app(ApiSettings(), runtime, wake=drains.wake)) as url:
            yield url
    finally:
        drains.stop()
