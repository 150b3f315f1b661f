"""Running a real ``palimpsest serve`` for a test: on the test's database, with no
embedding model to load (these tests are about processes, not embeddings)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest

from palimpsest.api.cli._exit_code import EXIT_USAGE
from palimpsest.projections.runtime import Runtime
from tests.projections.drains.killing import database_url

__all__ = [
    "assert_setting_refused_before_writing",
    "free_port",
    "published",
    "refused_serve",
    "serve_env",
    "start_serve",
    "until",
]


def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Wait for ``condition`` (polled), failing the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_env(runtime: Runtime, settings: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a ``serve`` on the test's database: no ``PALIMPSEST_``
    setting of the test's own, an embedder that points nowhere, and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
    env |= {
        "DATABASE_URL": database_url(runtime),
        "PALIMPSEST_EMBEDDER": "http",
        "PALIMPSEST_EMBEDDING_URL": "http://127.0.0.1:9/v1/embeddings",
        "PALIMPSEST_EMBEDDING_MODEL": "none",
    }
    return env | (settings or {})


def start_serve(
    runtime: Runtime, *args: str, settings: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``palimpsest serve`` (with ``args``, and ``settings`` in its environment)
    in a session of its own; return it and its base URL once ``/healthz`` answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.api.cli", "serve", "--port", str(port), *args],
        env=serve_env(runtime, settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert server.poll() is None, "serve exited"
        try:
            return httpx2.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx2.TransportError:
            return False

    try:
        until(healthy, 90, "serve is healthy")
    except BaseException:
        os.killpg(server.pid, signal.SIGKILL)  # and its children, in its session
        server.wait(30)
        raise
    return server, base


def published(base: str, headers: dict[str, str], content: str) -> None:
    """Write a note through ``base`` and read it back ``current`` (waiting up to 20 s
    for a drain to publish it)."""
    written = httpx2.post(
        f"{base}/v1/memories",
        json={"type": "note", "scope": "user", "content": content},
        headers=headers,
        timeout=30,
    )
    assert written.status_code == 201, written.text
    read = httpx2.get(
        f"{base}/v1/memories/{written.json()['id']}?wait=20", headers=headers, timeout=30
    )
    assert read.json()["status"] == "current", read.text


def stop_serve(server: subprocess.Popen[bytes]) -> None:
    """Stop ``serve`` and its children (SIGTERM to its session, SIGKILL after 30 s)."""
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)


def refused_serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``serve`` with ``env``, which it must refuse: return how it ended."""
    return subprocess.run(
        [sys.executable, "-m", "palimpsest.api.cli", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def assert_setting_refused_before_writing(store: Path, name: str, value: str) -> None:
    """Run ``serve`` on the embedded default in ``store`` (a directory not yet made) with
    no setting of the test's own but ``name`` at ``value``, which it must refuse: exit
    :data:`EXIT_USAGE` with one line naming the setting, no database started."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALIMPSEST_", "DATABASE_"))}
    env |= {"PALIMPSEST_DATA_DIR": str(store), name: value}
    done = refused_serve(env)
    assert done.returncode == EXIT_USAGE, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert name in line
    assert not store.exists()  # no database started, nothing written
