"""The drain actor: hints in, beliefs out, however messages are delivered or lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dramatiq
import pytest
import redis
from dramatiq.brokers.stub import StubBroker
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.hints import DRAIN_QUEUE, broker_for, send_drain_hint
from palimpsest.projections.runtime import Runtime
from palimpsest.workers._revision import register_drain_actor
from tests.api.helpers import post, remember
from tests.conftest import Tenant
from tests.projections.drains.killing import database_url, kill_mid_write
from tests.projections.drains.private_redis import PrivateRedis, private_redis


@pytest.fixture
def stub_worker(runtime: Runtime) -> Iterator[tuple[StubBroker, dramatiq.Actor[[], None]]]:
    broker = StubBroker()
    actor = register_drain_actor(broker, runtime.log, batch=10)
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=2)
    worker.start()
    yield broker, actor
    worker.stop()


def _status(client: TestClient, memory_id: str, headers: dict[str, str]) -> str:
    return str(client.get(f"/v1/memories/{memory_id}", headers=headers).json()["status"])


def test_a_hint_drains_everything_dirty_even_beyond_one_batch(
    stub_worker: tuple[StubBroker, dramatiq.Actor[[], None]], client: TestClient, tenant: Tenant
) -> None:
    broker, actor = stub_worker
    headers = tenant.headers()
    items = [
        {"op": "create_memory", "type": "note", "scope": "s", "content": f"n{i}"} for i in range(35)
    ]
    ids = [r["id"] for r in post(client, "/v1/batch", {"items": items}, headers).json()["results"]]
    actor.send()
    broker.join(DRAIN_QUEUE)
    assert {_status(client, m, headers) for m in ids} == {"current"}


def test_redelivered_hints_are_harmless(
    stub_worker: tuple[StubBroker, dramatiq.Actor[[], None]], client: TestClient, tenant: Tenant
) -> None:
    broker, actor = stub_worker
    headers = tenant.headers()
    created = remember(client, headers)
    for _ in range(5):
        actor.send()
    broker.join(DRAIN_QUEUE)
    answer = client.get(f"/v1/memories/{created['id']}", headers=headers).json()
    assert answer["status"] == "current"
    assert answer["revision"]["published"] == created["position"]


# -- real processes on a real broker -------------------------------------------------


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[PrivateRedis]:
    with private_redis(tmp_path) as server:
        yield server


def _start_worker(runtime: Runtime, broker_url: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "BROKER_URL": broker_url,
        "DATABASE_URL": database_url(runtime),
        "PALIMPSEST_SWEEP_INTERVAL_S": "0.5",
        "PALIMPSEST_DRAIN_BATCH": "20",
        "PALIMPSEST_DRAIN_LEASE_S": "1",
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dramatiq",
            "palimpsest.workers.boot",
            "--processes",
            "1",
            "--threads",
            "2",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _watermarks(runtime: Runtime, tenant: Tenant) -> list[tuple[Any, ...]]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        return conn.execute(
            f'SELECT r.memory_id, r.requested, r.published, b.revision FROM "{schema}".revisions r'
            f' LEFT JOIN "{schema}".beliefs b USING (tenant_id, memory_id) WHERE r.tenant_id = %s',
            (tenant.id,),
        ).fetchall()


def _until(condition: Callable[[], bool], timeout_s: float = 120.0) -> bool:
    """Wait for ``condition`` (polled); return whether it came true in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


@pytest.mark.slow
def test_killed_workers_and_lost_messages_delay_work_and_never_lose_it(
    runtime: Runtime, tenant: Tenant, redis_server: PrivateRedis
) -> None:
    # Given an API that sends hints to Redis, and 400 memories written
    broker = broker_for(redis_server.url)
    app = create_app(ApiSettings(), runtime, wake=lambda: send_drain_hint(broker))
    headers = tenant.headers()
    with TestClient(app) as client:
        for chunk in range(4):
            items = [
                {
                    "op": "create_memory",
                    "type": "note",
                    "scope": "s",
                    "content": f"{chunk}-{i}-{uuid.uuid4()}",
                }
                for i in range(100)
            ]
            assert post(client, "/v1/batch", {"items": items}, headers).status_code == 201
    # When a worker is SIGKILLed while draining: inside its first publish of the
    # tenant (beliefs and watermarks written, not committed), held there by a lock
    # (no clock decides where the kill lands)
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: _start_worker(runtime, redis_server.url),
        hold="INSERT INTO {schema}.index_tenants (tenant_id) VALUES (%s) RETURNING 1",
        params=(tenant.id,),
        table="index_tenants",
        holds_events_lock=False,
    )
    # And every queued message is lost
    redis.Redis.from_url(redis_server.url).flushdb()
    # Then the killed publish is whole or absent: it was sent with its COMMIT (one
    # round trip), which PostgreSQL runs once the lock is free, or never. No memory
    # has a belief without its watermark, or a watermark without its belief.
    rows = _watermarks(runtime, tenant)
    assert len(rows) == 400
    assert all(p == r == b for _, r, p, b in rows if p != 0), rows
    assert all(b is None for _, _, p, b in rows if p == 0), rows
    # And a restarted worker, with no message to start from, publishes everything
    second = _start_worker(runtime, redis_server.url)
    try:
        assert _until(lambda: all(p == r for _, r, p, _ in _watermarks(runtime, tenant)))
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(timeout=30)
    rows = _watermarks(runtime, tenant)
    # Each memory published exactly at its latest requested revision, its belief at that revision
    assert all(
        published == requested == belief_revision
        for _, requested, published, belief_revision in rows
    )
