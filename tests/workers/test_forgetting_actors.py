"""The forgetting drains as dramatiq actors: ``drain_raw_expiry`` and ``drain_erasure``.

A message is a hint: each actor finds its work in the database and keeps
hinting itself while it finds more. Both run on dramatiq's StubBroker here,
and the erasure drain also on the real Redis broker.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.hints import broker_for
from palimpsest.projections.runtime import Runtime
from palimpsest.workers._erasure import register_erasure_actor
from palimpsest.workers._expiry import register_expiry_actor
from tests.api.helpers import observe, remember
from tests.conftest import Tenant, count_events, wait_until
from tests.projections.drains.private_redis import PrivateRedis
from tests.workers.test_drain_actor import redis_server  # noqa: F401


def _worker(broker: dramatiq.Broker) -> Iterator[dramatiq.Worker]:
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=2)
    worker.start()
    yield worker
    worker.stop()


def _delete(client: TestClient, headers: dict[str, str]) -> str:
    token = client.delete("/v1/tenant", headers=headers).json()["confirmation_token"]
    accepted = client.delete(f"/v1/tenant?confirm={token}", headers=headers)
    assert accepted.status_code == 202, accepted.text
    return str(accepted.json()["id"])


def _populate(client: TestClient, headers: dict[str, str], count: int) -> None:
    for i in range(count):
        obs = observe(client, headers, f"note {i}")
        remember(client, headers, evidence=[{"observation_id": obs, "start": 0, "end": 4}])


@pytest.mark.slow
def test_one_erasure_hint_deletes_a_whole_tenant_beyond_one_batch(
    runtime: Runtime, client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    _populate(client, headers, 7)
    receipt_id = _delete(client, headers)
    broker = StubBroker()
    actor = register_erasure_actor(broker, runtime.log, batch=2)
    for _ in _worker(broker):
        actor.send()
        broker.join("erasure")
    receipt = client.get(f"/v1/erasures/{receipt_id}", headers=headers).json()
    assert receipt["status"] == "completed" and receipt["batches"] >= 4
    assert receipt["removed"]["observations"] == 7 and receipt["removed"]["memories"] == 7
    assert count_events(runtime, tenant, "ObservationErased") == 7


@pytest.mark.slow
def test_one_expiry_hint_expires_everything_due(runtime: Runtime, tenant: Tenant) -> None:
    later = datetime.now(UTC) + timedelta(days=31)
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: later)) as late:
        headers = tenant.headers()
        with TestClient(create_app(ApiSettings(), runtime)) as now:
            ids = [observe(now, headers, f"raw {i}") for i in range(5)]
        broker = StubBroker()
        actor = register_expiry_actor(broker, runtime.log, batch=2, clock=lambda: later)
        for _ in _worker(broker):
            actor.send()
            broker.join("expiry")
        assert count_events(runtime, tenant, "ObservationExpired") == 5
        for obs in ids:
            assert late.get(f"/v1/observations/{obs}/content", headers=headers).status_code == 410


def test_the_erasure_drain_on_a_real_redis_broker(
    runtime: Runtime,
    client: TestClient,
    tenant: Tenant,
    redis_server: PrivateRedis,  # noqa: F811
) -> None:
    headers = tenant.headers()
    _populate(client, headers, 3)
    receipt_id = _delete(client, headers)
    broker = broker_for(redis_server.url)
    actor = register_erasure_actor(broker, runtime.log, batch=1)
    for _ in _worker(broker):
        actor.send()
        wait_until(
            lambda: (
                client.get(f"/v1/erasures/{receipt_id}", headers=headers).json()["status"]
                == "completed"
            ),
            30,
            "the worker completes the erasure",
        )
    broker.close()
    assert count_events(runtime, tenant, "MemoryErased") == 3


@pytest.fixture(autouse=True)
def _no_global_broker() -> Iterator[None]:
    """Actors registered here must not become dramatiq's global broker's."""
    previous = dramatiq.get_broker()
    yield
    dramatiq.set_broker(previous)
