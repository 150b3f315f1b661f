"""A real server for the client's tests: the app on uvicorn, on loopback, over the
session's runtime and PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from palimpsest.api.app import create_app
from palimpsest.api.settings import ApiSettings
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.conftest import drain_until_caught_up


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
