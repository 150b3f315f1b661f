"""``palimpsest serve`` as a user runs it: real processes, a real data directory."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(data_dir: Path, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "api.cli",
            "--data-dir",
            str(data_dir),
            "serve",
            "--port",
            str(port),
        ],
        env=env,
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


def test_first_serve_bootstraps_a_tenant_and_a_second_serve_on_the_directory_is_refused(
    tmp_path: Path,
) -> None:
    # Given a first server on a fresh data directory
    port = _free_port()
    first = _serve(tmp_path, port)
    try:
        _wait_healthy(port, first)
        token_file = tmp_path / "admin-token"
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

        # Then it is refused with one line and exit 3, and the first keeps serving
        assert second.returncode == 3
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
