"""``palimpsest serve --workers 2``: two HTTP processes, exactly one of them drains,
and the other takes the drains over when that one is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import httpx2
import psutil
import pytest

from projections.runtime import Runtime
from tests.conftest import Tenant
from tests.projections.drains.killing import database_url, drain_owners


def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.1)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_workers_serve_one_drains_and_another_takes_over_when_it_is_killed(
    runtime: Runtime, tenant: Tenant
) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
    env |= {
        "DATABASE_URL": database_url(runtime),
        # No model to load: the test is about processes, not embeddings.
        "PALIMPSEST_EMBEDDER": "http",
        "PALIMPSEST_EMBEDDING_URL": "http://127.0.0.1:9/v1/embeddings",
        "PALIMPSEST_EMBEDDING_MODEL": "none",
    }
    server = subprocess.Popen(
        [sys.executable, "-m", "api.cli", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    headers = tenant.headers()

    def workers() -> set[int]:
        return {c.pid for c in psutil.Process(server.pid).children()}

    def healthy() -> bool:
        assert server.poll() is None
        try:
            return httpx2.get(f"{base}/healthz", timeout=2).status_code == 200
        except httpx2.TransportError:
            return False

    try:
        _until(healthy, 90, "serve --workers 2 is healthy")
        _until(
            lambda: len(drain_owners(runtime)) == 1,
            60,
            f"one drains: {workers()} {drain_owners(runtime)}",
        )
        [owner] = drain_owners(runtime)
        assert owner in workers()
        for _ in range(10):  # and only one, for a while
            assert drain_owners(runtime) == [owner]
            time.sleep(0.05)

        os.kill(owner, signal.SIGKILL)
        _until(
            lambda: len(owners := drain_owners(runtime)) == 1 and owners[0] != owner,
            30,
            "another worker drains",
        )
        # Whichever process serves it, a write is published by the new owner.
        written = httpx2.post(
            f"{base}/v1/memories",
            json={"type": "note", "scope": "user", "content": "drained by the new owner"},
            headers=headers,
            timeout=30,
        )
        assert written.status_code == 201, written.text
        read = httpx2.get(
            f"{base}/v1/memories/{written.json()['id']}?wait=20", headers=headers, timeout=30
        )
        assert read.json()["status"] == "current", read.text
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)
