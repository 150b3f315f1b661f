"""Demotion is ranking only: reads stamp accesses and report salience, nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import ApiSettings
from projections.history.verify import verify
from projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up


def _accesses(runtime: Runtime, memory_id: str) -> int:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT accesses FROM "{schema}".memory_access WHERE memory_id = %s', (memory_id,)
        ).fetchone()
    return int(row[0]) if row else 0


def test_reads_stamp_accesses_and_salience_follows_them(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers, type="fact")
    drain_until_caught_up(runtime)
    head = snapshot()["log_head"]

    first = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    second = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert _accesses(runtime, memory["id"]) == 2
    assert second["salience"] > first["salience"] > 0  # one more access ranks higher
    assert second["belief"] == first["belief"]  # and changes no label
    listed = client.get("/v1/memories", headers=headers).json()["items"]
    assert listed[0]["salience"] > 0 and _accesses(runtime, memory["id"]) == 3

    as_of = client.get(
        f"/v1/memories/{memory['id']}", headers=headers, params={"at_position": memory["position"]}
    ).json()
    assert "salience" not in as_of and _accesses(runtime, memory["id"]) == 3  # history is not use

    assert snapshot()["log_head"] == head  # never an event
    assert verify(runtime.database, tenant=tenant.id).divergences == []  # nor a read model


def test_salience_decays_with_time_and_a_pin_dominates(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    fact = remember(client, headers, type="fact", content="decays")
    pinned = remember(client, headers, type="preference", content="pinned")
    post(client, f"/v1/memories/{pinned['id']}/pin", {}, headers)
    drain_until_caught_up(runtime)
    now = client.get(f"/v1/memories/{fact['id']}", headers=headers).json()["salience"]
    year = datetime.now(UTC) + timedelta(days=365)
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: year)) as later:
        then = later.get(f"/v1/memories/{fact['id']}", headers=headers).json()["salience"]
        top = later.get(f"/v1/memories/{pinned['id']}", headers=headers).json()["salience"]
    # A fact's half-life is a year; one more access offsets part of it.
    assert then < now
    assert top > 1000 * now  # a pinned memory outranks it, two half-lives later
