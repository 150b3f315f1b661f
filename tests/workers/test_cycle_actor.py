"""The ``decay_cycle`` actor: each hint runs the due cycles of enabled tenants; a second
hint in the same slot runs none of them again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from fastapi.testclient import TestClient

from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.decay_cycle import CycleReport, ScheduledCycle
from palimpsest.projections.runtime import Runtime
from palimpsest.workers._cycles import register_cycle_actor
from tests.api.helpers import remember
from tests.conftest import Tenant, drain_until_caught_up


class _Recording(ScheduledCycle):
    """The real schedule, remembering what each hint ran."""

    returned: list[list[CycleReport]]

    def __call__(self, now: Any) -> list[CycleReport]:
        result = super().__call__(now)
        self.returned.append(result)
        return result


@pytest.mark.slow
def test_a_hint_runs_each_enabled_tenants_cycle_once_per_slot(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    remember(client, tenant.headers("writer"), type="note", content="Hinted note.")
    put = client.put(
        "/v1/tenant/forgetting",
        json={"enabled": True, "schedule_minutes": 10_080},  # one slot a week
        headers=tenant.headers(),
    )
    assert put.status_code == 200, put.text
    drain_until_caught_up(runtime)
    policy = CapturePolicy(raw_retention=timedelta(days=1), transient_retention=timedelta(days=1))
    scheduled = _Recording(
        runtime.log,
        Writer(runtime.log, policy, clock=lambda: datetime.now(UTC)),
        lambda: runtime.embedder.model_id,
    )
    scheduled.returned = []
    broker = StubBroker()
    actor = register_cycle_actor(broker, scheduled)
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
    worker.start()
    try:
        for _ in range(2):
            actor.send()
            broker.join(actor.queue_name, fail_fast=True)
            worker.join()
    finally:
        worker.stop()
    first, second = scheduled.returned
    assert tenant.id in {r.tenant_id for r in first}
    assert tenant.id not in {r.tenant_id for r in second}
