"""The ``drain_index`` actor: one hint embeds every published version, batch by batch."""

from __future__ import annotations

from collections.abc import Iterator

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from fastapi.testclient import TestClient

from palimpsest.projections.recall.indexing import unindexed_count
from palimpsest.projections.runtime import Runtime
from palimpsest.workers._indexing import register_index_actor
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up


@pytest.fixture(autouse=True)
def _no_global_broker() -> Iterator[None]:
    previous = dramatiq.get_broker()
    yield
    dramatiq.set_broker(previous)


@pytest.mark.slow
def test_one_hint_indexes_everything_beyond_one_batch(
    runtime: Runtime, client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    ids = [
        remember(client, headers, type="fact", content=f"Fact {i} about llamas")["id"]
        for i in range(7)
    ]
    drain_until_caught_up(runtime)
    # The session's store holds every earlier test's memories: count them as indexed
    # already, so this drain's work is the seven above (it sweeps every tenant).
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f'UPDATE "{runtime.database.schema}".revisions SET indexed = published'
            " WHERE tenant_id <> %s",
            (tenant.id,),
        )
    assert unindexed_count(runtime.log, tenant.id) == 7
    broker = StubBroker()
    actor = register_index_actor(broker, runtime.log, runtime.embedder, batch=2)
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
    worker.start()
    try:
        actor.send()
        broker.join("index")
    finally:
        worker.stop()
    assert unindexed_count(runtime.log, tenant.id) == 0
    found = post(client, "/v1/recall", {"query": "llamas", "k": 10}, headers).json()["items"]
    assert sorted(i["id"] for i in found) == sorted(ids)
