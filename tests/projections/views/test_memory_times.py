"""A memory's time, read once for the forgetting pass and the decay cycle.

The pass (stale singles) and the cycle (scores) must see one age per memory:
otherwise the pass calls a memory stale that the cycle keeps as fresh, or the
other way round. Memories are dated through observations captured in the past.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.decay_inputs import decay_inputs
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

NOW = datetime.now(UTC)


def _memory(client: TestClient, tenant: Tenant, content: str, days_ago: int, **fields: Any) -> UUID:
    body = {"content": content, "captured_at": (NOW - timedelta(days_ago)).isoformat()}
    observed = post(client, "/v1/observations", body, tenant.headers())
    assert observed.status_code == 201, observed.text
    evidence = [{"observation_id": observed.json()["id"], "start": 0, "end": len(content)}]
    made = remember(
        client,
        tenant.headers(),
        type="fact",
        scope="user",
        content=content,
        evidence=evidence,
        **fields,
    )
    return UUID(made["id"])


def _ages(runtime: Runtime, tenant: Tenant) -> tuple[dict[UUID, datetime], dict[UUID, datetime]]:
    """Each memory's time as the pass's singles carry it, and as the cycle's inputs do."""
    index_until_caught_up(runtime, tenant.id)
    found = select_candidates(
        runtime.log,
        tenant.id,
        now=NOW + timedelta(days=3650),
        settings=PassSettings(singles_cap=1000, pair_floor=None),
        model_id=runtime.embedder.model_id,
    )
    by_pass = {s.memory_id: s.memory_time for s in found.singles}
    by_cycle = {m.memory_id: m.time for m in decay_inputs(runtime.log, tenant.id) if m.time}
    return by_pass, by_cycle


def test_the_pass_and_the_cycle_give_a_memory_one_age(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a memory with an edge it later retracted, one written with an importance,
    # one revised with newer evidence, and one untouched since its capture
    tea = _memory(client, tenant, "I drink green tea every morning.", 90)
    car = _memory(client, tenant, "My car is a red Toyota Corolla.", 80, importance=0.9)
    desk = _memory(client, tenant, "My desk faces the window.", 70)
    cat = _memory(client, tenant, "The cat is called Miso.", 60)
    body = {"kind": "conflicts_with", "target_id": str(car), "reason": "they disagree"}
    edge = post(client, f"/v1/memories/{tea}/edges", body, tenant.headers())
    assert edge.status_code == 201, edge.text
    retract = f"/v1/memories/{tea}/edges/{edge.json()['id']}/retract"
    retracted = post(client, retract, {"reason": "they agree after all"}, tenant.headers())
    assert retracted.status_code == 201, retracted.text
    moved = "My desk faces the door now."
    observed = post(
        client,
        "/v1/observations",
        {"content": moved, "captured_at": (NOW - timedelta(20)).isoformat()},
        tenant.headers(),
    )
    evidence = [{"observation_id": observed.json()["id"], "start": 0, "end": len(moved)}]
    revised = post(
        client,
        f"/v1/memories/{desk}/versions",
        {"content": moved, "evidence": evidence},
        tenant.headers(),
    )
    assert revised.status_code == 201, revised.text

    by_pass, by_cycle = _ages(runtime, tenant)

    # Then both read the same time for each, and neither the edge nor the importance
    # touched a memory: only its current version's evidence did
    assert by_pass == by_cycle
    assert by_cycle == {
        tea: NOW - timedelta(90),
        car: NOW - timedelta(80),
        desk: NOW - timedelta(20),
        cat: NOW - timedelta(60),
    }
