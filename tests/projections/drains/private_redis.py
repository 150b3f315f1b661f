"""A Redis server of the test's own, on a free port, that a test can stop and start.

The shared Redis on 6379 belongs to everyone on the machine; a test that
stops its broker must own it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

__all__ = ["PrivateRedis", "private_redis"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateRedis:
    """One ``redis-server`` process on ``port``, no persistence."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and wait until it answers PING."""
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url)
        for _ in range(200):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        pytest.fail("private redis-server did not start")

    def stop(self) -> None:
        """Kill the server (as an outage would) and wait for it to be gone."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def queue_length(self, queue: str) -> int:
        """Return how many messages wait on dramatiq's ``queue``."""
        return int(redis.Redis.from_url(self.url).llen(f"dramatiq:{queue}"))


@contextmanager
def private_redis(directory: Path) -> Iterator[PrivateRedis]:
    """A started private Redis, stopped on exit.

    Without ``redis-server`` the test skips locally and fails in CI (``CI`` set):
    `.ci/run` runs where Redis is installed, and a skipped broker test proves
    nothing there.
    """
    if shutil.which("redis-server") is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not on PATH in CI")
        pytest.skip("redis-server is not on PATH")
    server = PrivateRedis(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
