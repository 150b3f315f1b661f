"""A dramatiq worker pool that dies is seen: ``/readyz`` of a ``serve`` with a broker
turns unready when work waits and no drain has beaten lately, and ``/metrics`` shows
the drains' lag (issue 43, item 14). Real worker processes, a real Redis."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.hints import broker_for, send_drain_hint
from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import until
from tests.api.helpers import remember
from tests.conftest import Tenant
from tests.projections.drains.killing import database_url
from tests.projections.drains.private_redis import PrivateRedis, private_redis

_STALL_S = 3.0
"""The test's ``PALIMPSEST_DRAIN_STALL_S``: short, so a dead pool is seen in seconds."""


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[PrivateRedis]:
    with private_redis(tmp_path) as server:
        yield server


def _start_pool(runtime: Runtime, broker_url: str) -> subprocess.Popen[bytes]:
    """``dramatiq palimpsest.workers.boot`` with two worker processes."""
    env = {
        **os.environ,
        "BROKER_URL": broker_url,
        "DATABASE_URL": database_url(runtime),
        "PALIMPSEST_SWEEP_INTERVAL_S": "0.5",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dramatiq",
            "palimpsest.workers.boot",
            "--processes",
            "2",
            "--threads",
            "2",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _stop(pool: subprocess.Popen[bytes]) -> None:
    if pool.poll() is None:
        os.killpg(pool.pid, signal.SIGTERM)
        try:
            pool.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(pool.pid, signal.SIGKILL)
            pool.wait(30)
    # Orphaned worker processes of a pool whose main process died
    with_group = [p for p in psutil.process_iter() if _in_group(p, pool.pid)]
    for process in with_group:
        process.kill()


def _in_group(process: psutil.Process, group: int) -> bool:
    try:
        return os.getpgid(process.pid) == group
    except (ProcessLookupError, psutil.Error):
        return False


def _lag_s(client: TestClient) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("palimpsest_drain_lag_seconds "):
            return float(line.rsplit(" ", 1)[1])
    pytest.fail("no palimpsest_drain_lag_seconds on /metrics")


def _drains_check(client: TestClient) -> tuple[str, bool]:
    """The drains' readiness check, and whether ``/readyz`` names them missing (the
    test's embedder never loads: readiness is asked about the drains alone)."""
    answer = client.get("/readyz").json()
    return str(answer["checks"]["drains"]), "drains" in answer.get("missing", [])


@pytest.mark.slow
def test_readyz_turns_unready_when_the_worker_pool_died_with_work_waiting(
    runtime: Runtime, tenant: Tenant, redis_server: PrivateRedis
) -> None:
    # Given a serving app that sends hints to Redis, and a pool of two worker processes
    broker = broker_for(redis_server.url)
    app = create_app(ApiSettings(), runtime, wake=lambda: send_drain_hint(broker))
    app.state.drain_stall_s = _STALL_S
    headers = tenant.headers()
    pool = _start_pool(runtime, redis_server.url)
    try:
        with TestClient(app) as client:
            first = remember(client, headers, content=f"drained by the pool {uuid.uuid4()}")
            until(
                lambda: (
                    client.get(f"/v1/memories/{first['id']}", headers=headers).json()["status"]
                    == "current"
                ),
                120,
                "the pool publishes the first write",
            )
            # Then, while the pool works, it is ready and the lag is nothing
            assert _drains_check(client) == ("external", False)
            until(lambda: _lag_s(client) == 0.0, 30, "the lag is 0 once caught up")

            # When one worker process is killed: dramatiq's main process shuts the
            # whole pool down (why a deployment needs a supervisor, docs/scaling.md)
            children = psutil.Process(pool.pid).children()
            assert len(children) == 2
            children[0].kill()
            pool.wait(60)
            # And a write comes in that nothing drains
            waiting = remember(client, headers, content=f"left waiting {uuid.uuid4()}")
            # Then /readyz turns unready, naming the drains stalled, within the bound
            until(lambda: _drains_check(client)[1], 30, "/readyz names the drains")
            answer = client.get("/readyz")
            assert answer.status_code == 503
            assert answer.json()["type"] == "urn:palimpsest:problem:not-ready"
            assert answer.json()["checks"]["drains"] == "stalled"
            # And /metrics shows the lag growing: the age of the waiting write
            lag = _lag_s(client)
            assert lag > 0
            until(lambda: _lag_s(client) > lag, 10, "the lag grows")
            assert (
                client.get(f"/v1/memories/{waiting['id']}", headers=headers).json()["status"]
                == "pending"
            )

            # When the supervisor starts the pool again
            _stop(pool)
            pool = _start_pool(runtime, redis_server.url)
            # Then the write is published, /readyz is ready and the lag back to 0
            until(lambda: _drains_check(client) == ("external", False), 120, "ready again")
            until(
                lambda: (
                    client.get(f"/v1/memories/{waiting['id']}", headers=headers).json()["status"]
                    == "current"
                ),
                60,
                "the waiting write is published",
            )
            until(lambda: _lag_s(client) == 0.0, 30, "the lag is 0 again")
    finally:
        _stop(pool)
