"""Loopback servers for the judge client: recordings replayed, with scripted failures first."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from palimpsest.projections.judgment._recorded import Recording, load_recordings, replay
from tests.projections.judgment.batches import FIXTURES, JudgeBatch, load_batches


@dataclass
class Seen:
    """One request the server received."""

    headers: dict[str, str]
    body: bytes


@dataclass
class ScriptedServer:
    """Answers the scripted failures first (a status, headers, an empty body), then
    from the recordings, or with one recording's answer to every request."""

    recordings: dict[str, Recording]
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    answer_with: Recording | None = None
    seen: list[Seen] = field(default_factory=list)
    url: str = ""


@pytest.fixture(scope="session")
def recordings() -> dict[str, Recording]:
    """Every recording in tests/fixtures/judge/."""
    return load_recordings(FIXTURES)


@pytest.fixture(scope="session")
def judge_batches() -> dict[str, JudgeBatch]:
    """The batches the recordings were made for, by name."""
    return load_batches()


@pytest.fixture
def scripted_server(
    recordings: dict[str, Recording],
) -> Iterator[Callable[..., ScriptedServer]]:
    """Start a scripted loopback server: ``scripted_server(failures=[(429, {})])``."""
    servers: list[ThreadingHTTPServer] = []

    def start(
        failures: list[tuple[int, dict[str, str]]] | None = None,
        answer_with: Recording | None = None,
    ) -> ScriptedServer:
        state = ScriptedServer(recordings, list(failures or []), answer_with)
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    state.seen.append(Seen(dict(self.headers.items()), data))
                    failure = state.failures.pop(0) if state.failures else None
                if failure is not None:
                    status, headers = failure
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if state.answer_with is not None:
                    status, body = (
                        state.answer_with.status,
                        json.dumps(state.answer_with.body).encode(),
                    )
                else:
                    status, body = replay(state.recordings, data)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        servers.append(server)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        state.url = f"http://127.0.0.1:{server.server_port}"
        return state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()
