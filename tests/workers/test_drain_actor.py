"""The drain actor: hints in, beliefs out, however messages are delivered or lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
import redis
from dramatiq.brokers.stub import StubBroker
from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from projections.drains.hints import DRAIN_QUEUE, broker_for, send_drain_hint
from projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant
from workers.revision import register_drain_actor

REDIS_URL = os.environ.get("PALIMPSEST_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


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
def redis_broker() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as e:
        if os.environ.get("CI"):
            pytest.fail(f"Redis unavailable in CI at {REDIS_URL}: {e}")
        pytest.skip(f"Redis unavailable at {REDIS_URL}: {e}")
    client.flushdb()
    yield client
    client.flushdb()


def _start_worker(runtime: Runtime) -> subprocess.Popen[bytes]:
    database = runtime.database
    url = (
        f"postgresql://{database.owner_user}:{database.owner_password}@/{database.dbname}"
        f"?host={database.host}&port={database.port}"
    )
    env = {
        **os.environ,
        "BROKER_URL": REDIS_URL,
        "DATABASE_URL": url,
        "PALIMPSEST_SWEEP_INTERVAL_S": "0.5",
        "PALIMPSEST_DRAIN_BATCH": "20",
        "PALIMPSEST_DRAIN_LEASE_S": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "dramatiq", "workers.boot", "--processes", "1", "--threads", "2"],
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


def test_killed_workers_and_lost_messages_delay_work_and_never_lose_it(
    runtime: Runtime, tenant: Tenant, redis_broker: redis.Redis
) -> None:
    # Given an API that sends hints to Redis, and 400 memories written
    broker = broker_for(REDIS_URL)
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
    # When a worker is killed with SIGKILL while draining
    first = _start_worker(runtime)
    deadline = time.monotonic() + 30
    while not any(p for _, _, p, _ in _watermarks(runtime, tenant)) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    # And every queued message is lost
    redis_broker.flushdb()
    assert any(p < r for _, r, p, _ in _watermarks(runtime, tenant)), "drained before the kill"
    # Then a restarted worker, with no message to start from, publishes everything
    second = _start_worker(runtime)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rows = _watermarks(runtime, tenant)
            if all(p == r for _, r, p, _ in rows):
                break
            time.sleep(0.1)
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(timeout=30)
    rows = _watermarks(runtime, tenant)
    assert len(rows) == 400
    # Each memory published exactly at its latest requested revision, its belief at that revision
    assert all(
        published == requested == belief_revision
        for _, requested, published, belief_revision in rows
    )
