"""A real HTTP server for tests that need real concurrency: uvicorn on loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI


@contextmanager
def live_server(app: FastAPI, *, limit_concurrency: int | None = None) -> Iterator[str]:
    """Serve ``app`` on a free loopback port in a thread; yield its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            # No log_level: uvicorn would set it on its loggers for the whole
            # process, and a later test of the service's logging sees none.
            log_config=None,
            limit_concurrency=limit_concurrency,
        )
    )
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
