"""Tokens, roles and tenant isolation: no endpoint shows or changes another tenant's data."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import observe, problem_slug, remember
from tests.conftest import Tenant

MEMORY = {"type": "fact", "scope": "user", "content": "Lives in Lyon"}


def _write_requests(memory_id: str, target_id: str, observation_id: str) -> list[tuple[str, Any]]:
    return [
        ("/v1/observations", {"content": "hello"}),
        ("/v1/memories", MEMORY),
        (
            "/v1/memories",
            {**MEMORY, "evidence": [{"observation_id": observation_id, "start": 0, "end": 2}]},
        ),
        (f"/v1/memories/{memory_id}/versions", {"content": "Lives in Paris"}),
        (f"/v1/memories/{memory_id}/edges", {"kind": "conflicts_with", "target_id": target_id}),
        ("/v1/batch", {"items": [{"op": "create_memory", **MEMORY}]}),
    ]


@pytest.mark.parametrize(
    "auth", [None, "Bearer nope", "Bearer pal_" + "0" * 32 + "_" + "A" * 43, "Basic abc"]
)
def test_requests_without_a_valid_token_are_401_and_write_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, auth: str | None
) -> None:
    memory = remember(client, tenant.headers())
    target = remember(client, tenant.headers())
    obs = observe(client, tenant.headers())
    headers = {} if auth is None else {"Authorization": auth}
    before = snapshot()
    for path, body in _write_requests(memory["id"], target["id"], obs):
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == 401, path
        assert problem_slug(response) == "unauthenticated"
        assert response.headers["WWW-Authenticate"] == "Bearer"
    for path in [f"/v1/memories/{memory['id']}/versions", f"/v1/observations/{obs}"]:
        assert client.get(path, headers=headers).status_code == 401
    assert snapshot() == before


def test_a_reader_can_read_but_every_write_is_403_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    memory = remember(client, tenant.headers())
    target = remember(client, tenant.headers())
    obs = observe(client, tenant.headers())
    reader = tenant.headers("reader")
    before = snapshot()
    for path, body in _write_requests(memory["id"], target["id"], obs):
        response = client.post(path, json=body, headers={**reader, "Idempotency-Key": "r1"})
        assert response.status_code == 403, path
        assert problem_slug(response) == "forbidden"
    assert snapshot() == before
    assert client.get(f"/v1/memories/{memory['id']}/versions", headers=reader).status_code == 200


def test_another_tenants_ids_are_invisible_to_every_endpoint(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    # Given a memory, an observation and an edge target in the victim tenant
    victim = tenant.headers()
    obs = observe(client, victim, "victim secret text")
    memory = remember(client, victim, evidence=[{"observation_id": obs, "start": 0, "end": 6}])
    target = remember(client, victim)
    # When another tenant's writer guesses those ids
    intruder = other_tenant.headers("writer")
    before = snapshot()
    for path in [
        f"/v1/memories/{memory['id']}/versions",
        f"/v1/observations/{obs}",
        f"/v1/observations/{obs}/content",
    ]:
        response = client.get(path, headers=intruder)
        assert response.status_code == 404, path
        assert "victim" not in response.text
    own_target = remember(client, intruder)
    before = snapshot()
    attempts: list[tuple[str, Any]] = [
        (f"/v1/memories/{memory['id']}/versions", {"content": "hijack"}),
        (f"/v1/memories/{memory['id']}/edges", {"kind": "extends", "target_id": own_target["id"]}),
        (f"/v1/memories/{own_target['id']}/edges", {"kind": "extends", "target_id": target["id"]}),
        ("/v1/memories", {**MEMORY, "evidence": [{"observation_id": obs, "start": 0, "end": 6}]}),
        (
            "/v1/batch",
            {"items": [{"op": "add_version", "memory_id": memory["id"], "content": "x"}]},
        ),
    ]
    # Then every attempt is 404 and nothing is written anywhere
    for path, body in attempts:
        response = client.post(path, json=body, headers=intruder)
        assert response.status_code == 404, path
        assert problem_slug(response) == "not-found"
    assert snapshot() == before
    # And the victim's data is unchanged
    versions = client.get(f"/v1/memories/{memory['id']}/versions", headers=victim).json()[
        "versions"
    ]
    assert [v["content"] for v in versions] == ["Prefers dark mode"]


def test_idempotency_keys_of_another_tenant_never_replay(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    first = client.post(
        "/v1/memories", json=MEMORY, headers={**tenant.headers(), "Idempotency-Key": "shared"}
    )
    second = client.post(
        "/v1/memories", json=MEMORY, headers={**other_tenant.headers(), "Idempotency-Key": "shared"}
    )
    assert second.status_code == 201
    assert "Idempotent-Replayed" not in second.headers
    assert second.json()["id"] != first.json()["id"]


def test_every_read_needs_a_token_and_sees_only_its_tenant(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    memory = remember(client, tenant.headers())
    obs = observe(client, tenant.headers())
    reads = [
        "/v1/memories",
        f"/v1/memories/{memory['id']}",
        "/v1/revision",
        f"/v1/memories/{memory['id']}/versions",
        f"/v1/observations/{obs}",
        f"/v1/observations/{obs}/content",
    ]
    for path in reads:
        response = client.get(path)
        assert response.status_code == 401, path
        assert problem_slug(response) == "unauthenticated"
    intruder = other_tenant.headers("reader")
    assert client.get("/v1/memories", headers=intruder).json()["items"] == []
    assert client.get("/v1/revision", headers=intruder).json()["dirty_memories"] == 0
