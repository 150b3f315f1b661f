"""A bare ASGI app under uvicorn, for the floors of :mod:`tests.benchmarks.write_floor`.

Usage: python -m tests.benchmarks.bare_asgi MODE PORT CONNINFO SCHEMA TENANT TOKEN

It answers every request with a small JSON body, with none of FastAPI, our
middlewares or our routes, after doing, on its event loop, what ``MODE`` says:

- ``nothing``: nothing (the HTTP transport's floor: uvicorn, httptools, uvloop);
- ``raw``: the append benchmark's raw rows, through psycopg as the runtime role
  (``CONNINFO``, in ``SCHEMA``, for ``TENANT``);
- ``library``: one memory through ``Writer.write``, authenticated by ``TOKEN``, on
  a runtime of its own (``DATABASE_URL``), as a serving process's runtime is set
  up (no groups sent ahead).

Each answer carries the seconds its own work took (``"took"``), so that what the
process spends around it can be told from what the work itself costs.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import psycopg
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.eventlog import SERVING_GROUPS_AHEAD
from palimpsest.projections.store.settings import DatabaseSettings
from tests.benchmarks.append import raw_insert
from tests.conftest import library_writer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MODES = ("nothing", "raw", "library")
"""What the app does for each request, by the name its first argument gives."""


def _work(mode: str, conninfo: str, schema: str, tenant: str, token: str) -> Callable[[Any], None]:
    """What one request does with its JSON body, in ``mode``."""
    if mode == "raw":
        conn = psycopg.connect(conninfo)
        return lambda body: raw_insert(conn, schema, tenant, 1)
    if mode == "library":
        runtime = start_runtime(DatabaseSettings())
        runtime.log.group.ahead = SERVING_GROUPS_AHEAD
        caller = authenticate(runtime.log, token)
        writer = library_writer(runtime)

        def write(body: Any) -> None:
            spec = MemorySpec(
                body["type"], body["scope"], None, None, body["content"], (), None, 1.0
            )
            writer.write(caller, [spec], batch=False)

        return write
    return lambda body: None


def app_for(work: Callable[[Any], None]) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """An ASGI app that reads a JSON body, calls ``work`` with it on the event loop,
    and answers 201 with the seconds ``work`` took."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        started = time.perf_counter()
        work(json.loads(body))
        answer = json.dumps({"took": time.perf_counter() - started}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer)).encode()),
        ]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    return app


def main() -> None:
    mode, port, conninfo, schema, tenant, token = sys.argv[1:7]
    if mode not in MODES:
        sys.exit(f"bare_asgi: MODE must be one of {', '.join(MODES)}")
    uvicorn.run(
        app_for(_work(mode, conninfo, schema, tenant, token)),
        host="127.0.0.1",
        port=int(port),
        http="httptools",
        log_level="error",
        access_log=False,
        # The floors are measured in turns: a connection waits through the others'.
        timeout_keep_alive=3600,
    )


if __name__ == "__main__":
    main()
