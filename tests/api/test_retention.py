"""The tenant's retention policy: shorter applies to deadlines not yet passed,
longer never extends one; the deployment sets the maxima."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.drains._retention import apply_retention
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug
from tests.conftest import Tenant, count_events
from tests.projections.drains.killing import drain_process, kill_mid_write


def _deadline(client: TestClient, headers: dict[str, str], obs: str) -> datetime:
    meta = client.get(f"/v1/observations/{obs}", headers=headers).json()
    return datetime.fromisoformat(meta["retention_deadline"])


def _apply_all(runtime: Runtime, now: datetime) -> int:
    total = 0
    while moved := apply_retention(runtime.log, now=now, limit=2):  # small batches: resumes
        total += moved
    return total


def test_a_shorter_retention_moves_existing_deadlines_and_applies_to_new_captures(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    old = [observe(client, headers, f"said {i}") for i in range(5)]
    before = {o: _deadline(client, headers, o) for o in old}
    assert all(d - datetime.now(UTC) > timedelta(days=29) for d in before.values())

    response = client.put("/v1/tenant/retention", json={"raw_hours": 48}, headers=headers)
    assert response.status_code == 200, response.text
    policy = response.json()
    assert policy["raw_hours"] == 48 and policy["max_raw_hours"] == 720
    assert client.get("/v1/tenant/retention", headers=headers).json()["raw_hours"] == 48

    new = observe(client, headers, "said later")
    assert _deadline(client, headers, new) - datetime.now(UTC) < timedelta(hours=49)

    _apply_all(runtime, datetime.now(UTC))
    _apply_all(runtime, datetime.now(UTC))
    assert count_events(runtime, tenant, "ObservationDeadlineShortened") == len(
        old
    )  # each moved once
    for o in old:
        moved = _deadline(client, headers, o)
        assert moved < before[o] and moved - datetime.now(UTC) < timedelta(hours=49)

    # Lengthening again extends nothing already set.
    client.put("/v1/tenant/retention", json={"raw_hours": 720}, headers=headers)
    _apply_all(runtime, datetime.now(UTC))
    assert count_events(runtime, tenant, "ObservationDeadlineShortened") == len(old)
    assert all(_deadline(client, headers, o) - datetime.now(UTC) < timedelta(hours=49) for o in old)
    assert verify(runtime.database, tenant=tenant.id).divergences == []


@pytest.fixture
def in_three_days(runtime: Runtime) -> Iterator[TestClient]:
    later = datetime.now(UTC) + timedelta(days=3)
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: later)) as client:
        yield client


def test_shortened_deadlines_expire_at_their_new_time(
    client: TestClient, in_three_days: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "short-lived words")
    client.put("/v1/tenant/retention", json={"raw_hours": 24}, headers=headers)
    later = datetime.now(UTC) + timedelta(days=3)
    _apply_all(runtime, datetime.now(UTC))
    while expire_due(runtime.log, now=later):
        pass
    gone = in_three_days.get(f"/v1/observations/{obs}/content", headers=headers)
    assert gone.status_code == 410 and problem_slug(gone) == "content-expired"


def test_retention_is_bounded_and_set_by_admins_only(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    writer = tenant.headers("writer")
    before = snapshot()
    for body, who, status in (
        ({"raw_hours": 721}, headers, 422),
        ({"raw_hours": 0}, headers, 422),
        ({"transient_hours": 25}, headers, 422),
        ({"raw_hours": "a week"}, headers, 422),
        ({"raw_hours": 24}, writer, 403),
        ({"raw_hours": 24}, {}, 401),
    ):
        response = client.put("/v1/tenant/retention", json=body, headers=who)
        assert response.status_code == status, (body, response.text)
        problem_slug(response)
    assert snapshot() == before
    assert post(client, "/v1/observations", {"content": "x"}, headers).status_code == 201


@pytest.mark.slow
def test_a_retention_pass_killed_mid_write_leaves_nothing_and_the_next_completes(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given observations whose deadlines a shorter retention moves (more than a
    # pipelined write holds: this write sends each statement and waits for it, so
    # its COMMIT is not sent while it is blocked)
    headers = tenant.headers()
    items = [{"op": "create_observation", "content": f"note {i}"} for i in range(70)]
    created = post(client, "/v1/batch", {"items": items}, headers).json()["results"]
    observations = [r["id"] for r in created]
    before = {o: _deadline(client, headers, o) for o in observations}
    client.put("/v1/tenant/retention", json={"raw_hours": 12}, headers=headers)
    # When a retention pass is SIGKILLed inside its write (its events inserted; held
    # at its last statement, which marks the tenant's work)
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: drain_process(
            runtime,
            "from datetime import UTC, datetime; from uuid import UUID\n"
            "from palimpsest.projections.drains._retention import apply_tenant_retention\n"
            f"apply_tenant_retention(log, UUID('{tenant.id}'), 0, now=datetime.now(UTC),"
            " limit=1000)",
        ),
        hold="SELECT 1 FROM {schema}.tenant_work WHERE tenant_id = %s FOR UPDATE",
        params=(tenant.id,),
        table="tenant_work",
    )
    # Then nothing of it remains
    assert count_events(runtime, tenant, "ObservationDeadlineShortened") == 0
    assert {o: _deadline(client, headers, o) for o in observations} == before
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    # And the next pass moves every deadline, once
    _apply_all(runtime, datetime.now(UTC))
    _apply_all(runtime, datetime.now(UTC))
    assert count_events(runtime, tenant, "ObservationDeadlineShortened") == len(observations)
    assert all(
        _deadline(client, headers, o) - datetime.now(UTC) < timedelta(hours=13)
        for o in observations
    )
