"""Structured logs: every line is one JSON object, with no terminal colour codes."""

from __future__ import annotations

import json
import logging
import socket
import threading
from typing import Any

import pytest
import uvicorn

from palimpsest.api._logformat import configure_logging
from tests.conftest import wait_until


async def _empty_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while True:
            kind = (await receive())["type"].removeprefix("lifespan.")
            await send({"type": f"lifespan.{kind}.complete"})
            if kind == "shutdown":
                return


def test_uvicorns_own_lines_carry_no_colour_codes(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the service's logging, and uvicorn starting and stopping as serve runs it
    configure_logging("INFO")
    # Another test's uvicorn may have raised its loggers' level for the process.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn.Config(_empty_app, host="127.0.0.1", port=port, log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run)
    thread.start()
    wait_until(lambda: server.started, 20, "uvicorn has started")
    server.should_exit = True
    thread.join(20)

    # Then uvicorn's lines (which it logs with a coloured copy) are plain JSON
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line]
    started = [line for line in lines if line["logger"] == "uvicorn.error"]
    assert any(line["event"].startswith("Started server process") for line in started), lines
    for line in lines:
        assert "color_message" not in line
        assert "\x1b" not in json.dumps(line, ensure_ascii=False)
