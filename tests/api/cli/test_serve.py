"""``palimpsest serve`` as a user runs it: real processes, a real data directory."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import pytest

from palimpsest.api.cli import EXIT_USAGE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(
    data_dir: Path, port: int, *, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    """Start ``palimpsest serve --data-dir D --port P`` (global options after the verb)."""
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "palimpsest.api.cli",
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
        ],
        env={**environment, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_healthy(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.TransportError:
            time.sleep(0.2)
    pytest.fail("palimpsest serve did not become healthy within 60 s")


@pytest.mark.slow
def test_first_serve_bootstraps_a_tenant_and_a_second_serve_on_the_directory_is_refused(
    tmp_path: Path,
) -> None:
    # Given a first server on a fresh data directory
    port = _free_port()
    first = _serve(tmp_path, port)
    try:
        _wait_healthy(port, first)
        # The README's token line: `palimpsest token path` names the file serve wrote
        shown = subprocess.run(
            [
                sys.executable,
                "-m",
                "palimpsest.api.cli",
                "--data-dir",
                str(tmp_path),
                "token",
                "path",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        token_file = Path(shown)
        assert token_file == tmp_path / "admin-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        created = httpx2.post(
            f"http://127.0.0.1:{port}/v1/memories",
            timeout=10,
            headers={"Authorization": f"Bearer {token}"},
            json={"type": "fact", "scope": "user", "content": "Lives in Lyon"},
        )
        assert created.status_code == 201
        # The in-process drain makes the write current without anyone asking
        current = httpx2.get(
            f"http://127.0.0.1:{port}/v1/memories/{created.json()['id']}",
            params={"wait": 10},
            headers={"Authorization": f"Bearer {token}"},
            timeout=15,
        )
        assert current.json()["status"] == "current"

        # When a second server starts on the same directory
        second = _serve(tmp_path, _free_port())
        _, err = second.communicate(timeout=60)

        # Then it is refused with one line and the usage/conflict exit code (not the
        # database's), and the first keeps serving
        assert second.returncode == EXIT_USAGE
        lines = [line for line in err.splitlines() if line.startswith("palimpsest: error:")]
        assert len(lines) == 1 and "in use" in lines[0]
        assert httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)

    # And SIGTERM stops the embedded PostgreSQL with it
    assert first.returncode == 0
    postmaster = tmp_path / "pgdata" / "postmaster.pid"
    deadline = time.monotonic() + 20
    while postmaster.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not postmaster.exists()


class _GatedEmbeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible embeddings endpoint that answers once ``gate`` is set."""

    gate = threading.Event()

    def do_POST(self) -> None:
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        self.gate.wait(60)
        body = json.dumps(
            {"data": [{"index": i, "embedding": [1.0] + [0.0] * 383} for i in range(len(texts))]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_serve_is_alive_at_once_and_ready_only_once_its_embedder_answers(
    tmp_path: Path,
) -> None:
    # Given an embedding endpoint that does not answer yet
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), _GatedEmbeddings)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    _GatedEmbeddings.gate.clear()
    port = _free_port()
    server = _serve(
        tmp_path,
        port,
        env={
            "PALIMPSEST_EMBEDDER": "http",
            "PALIMPSEST_EMBEDDING_URL": f"http://127.0.0.1:{endpoint.server_port}",
            "PALIMPSEST_EMBEDDING_MODEL": "gated-384",
        },
    )
    try:
        # When serve has started, it is alive but not ready: the embedder is missing
        _wait_healthy(port, server)
        waiting = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert waiting.status_code == 503
        assert waiting.json()["type"] == "urn:palimpsest:problem:not-ready"
        assert waiting.json()["missing"] == ["embedder"]
        assert waiting.json()["checks"]["drains"] == "ok"

        # Then, once the endpoint answers, it becomes ready
        _GatedEmbeddings.gate.set()
        deadline = time.monotonic() + 30
        ready = waiting
        while ready.status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
            ready = httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        assert ready.json()["status"] == "ready"
    finally:
        _GatedEmbeddings.gate.set()
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=60)
        endpoint.shutdown()
        endpoint.server_close()

    # And its log names the admin token's file, in lines with no colour codes
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    serving = next(line for line in lines if line["event"] == "serving")
    assert serving["admin_token_file"] == str(tmp_path / "admin-token")
    assert not any("color_message" in line for line in lines)
