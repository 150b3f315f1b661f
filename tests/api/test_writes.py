"""The write API records what it is given, and reads it back with provenance."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant


def test_memory_with_evidence_reads_back_with_content_and_excerpt(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    obs_id = observe(client, headers, "Note: I prefer dark mode in every editor.")
    created = remember(
        client, headers, evidence=[{"observation_id": obs_id, "start": 6, "end": 24}]
    )
    versions = client.get(f"/v1/memories/{created['id']}/versions", headers=headers).json()
    assert versions["type"] == "preference"
    [version] = versions["versions"]
    assert version["version_id"] == created["version_id"]
    assert version["content"] == "Prefers dark mode"
    assert version["position"] <= created["position"]
    assert version["evidence"][0]["observation_id"] == obs_id
    assert (version["evidence"][0]["start"], version["evidence"][0]["end"]) == (6, 24)


def test_new_version_appends_and_keeps_the_old_one(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    revised = post(
        client,
        f"/v1/memories/{created['id']}/versions",
        {"content": "Switched to light mode"},
        headers,
    )
    assert revised.status_code == 201
    assert revised.json()["position"] > created["position"]
    contents = [
        v["content"]
        for v in client.get(f"/v1/memories/{created['id']}/versions", headers=headers).json()[
            "versions"
        ]
    ]
    assert contents == ["Prefers dark mode", "Switched to light mode"]


def test_observation_metadata_and_content_read_back(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    response = post(
        client,
        "/v1/observations",
        {"content": "héllo wörld", "source": "chat", "transient": True},
        headers,
    )
    assert response.status_code == 201
    created = response.json()
    meta = client.get(f"/v1/observations/{created['id']}", headers=headers).json()
    assert meta["size_bytes"] == len("héllo wörld".encode())
    assert meta["transient"] is True
    assert meta["retention_deadline"].startswith(created["retention_deadline"][:13])
    content = client.get(f"/v1/observations/{created['id']}/content", headers=headers)
    assert content.content.decode("utf-8") == "héllo wörld"
    assert content.headers["content-type"].startswith("text/plain")


def test_transient_observations_expire_sooner_than_raw_ones(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    raw = post(client, "/v1/observations", {"content": "raw"}, headers).json()
    transient = post(
        client, "/v1/observations", {"content": "tmp", "transient": True}, headers
    ).json()
    assert transient["retention_deadline"] < raw["retention_deadline"]


def test_edges_are_recorded_and_event_memories_accept_only_extends(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    older = remember(client, headers)
    newer = remember(client, headers, content="Prefers light mode")
    event = remember(client, headers, type="event", content="Standup happened")
    ok = post(
        client,
        f"/v1/memories/{newer['id']}/edges",
        {"kind": "supersedes", "target_id": older["id"]},
        headers,
    )
    assert ok.status_code == 201
    assert ok.json()["kind"] == "supersedes"
    refused = post(
        client,
        f"/v1/memories/{event['id']}/edges",
        {"kind": "supersedes", "target_id": older["id"]},
        headers,
    )
    assert refused.status_code == 422
    assert problem_slug(refused) == "edge-not-allowed"
    extends = post(
        client,
        f"/v1/memories/{event['id']}/edges",
        {"kind": "extends", "target_id": older["id"]},
        headers,
    )
    assert extends.status_code == 201
    again = post(
        client,
        f"/v1/memories/{newer['id']}/edges",
        {"kind": "supersedes", "target_id": older["id"]},
        headers,
    )
    # The same edge again is the same operator decision: it replays, recording nothing.
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["id"] == ok.json()["id"]
    assert again.json()["decision_id"] == ok.json()["decision_id"]


def test_batch_applies_every_item_and_resolves_references(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    items: list[dict[str, Any]] = [
        {"op": "create_observation", "content": "We decided to ship on Friday."},
        {
            "op": "create_memory",
            "type": "decision",
            "scope": "team",
            "project": "apollo",
            "content": "Ship on Friday",
            "evidence": [{"observation_id": "$0", "start": 15, "end": 29}],
        },
        {"op": "add_version", "memory_id": "$1", "content": "Ship on Monday"},
        {"op": "create_memory", "type": "decision", "scope": "team", "content": "Old plan"},
        {"op": "add_edge", "memory_id": "$1", "kind": "supersedes", "target_id": "$3"},
    ]
    response = post(client, "/v1/batch", {"items": items}, headers)
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    assert len(results) == 5
    positions = [r["position"] for r in results]
    assert positions[0] < positions[1] < positions[2]
    memory_id = results[1]["id"]
    versions = client.get(f"/v1/memories/{memory_id}/versions", headers=headers).json()["versions"]
    assert [v["content"] for v in versions] == ["Ship on Friday", "Ship on Monday"]
    assert versions[0]["evidence"][0]["observation_id"] == results[0]["id"]


def test_batch_is_all_or_nothing(client: TestClient, tenant: Tenant, snapshot: Any) -> None:
    headers = tenant.headers()
    before = snapshot()
    items: list[dict[str, Any]] = [
        {"op": "create_observation", "content": f"item {i}"} for i in range(10)
    ]
    items.append(
        {
            "op": "create_memory",
            "type": "fact",
            "scope": "u",
            "content": "x",
            "evidence": [{"observation_id": "$0", "start": 0, "end": 999}],
        }
    )
    response = post(client, "/v1/batch", {"items": items}, headers)
    assert response.status_code == 422
    assert problem_slug(response) == "evidence-out-of-range"
    assert "item 10" in response.json()["detail"]
    assert snapshot() == before


def test_batch_of_a_thousand_writes_lands_in_one_transaction(
    client: TestClient, tenant: Tenant
) -> None:
    items: list[dict[str, Any]] = [
        {"op": "create_memory", "type": "note", "scope": "bulk", "content": f"note {i}"}
        for i in range(1000)
    ]
    response = post(client, "/v1/batch", {"items": items}, tenant.headers())
    assert response.status_code == 201
    positions = [r["position"] for r in response.json()["results"]]
    assert positions == sorted(positions)
    too_many = post(client, "/v1/batch", {"items": [*items, items[0]]}, tenant.headers())
    assert too_many.status_code == 422


def test_same_idempotency_key_and_body_replays_without_writing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = {**tenant.headers(), "Idempotency-Key": "create-pref-1"}
    body = {"type": "preference", "scope": "user", "content": "Prefers tea"}
    first = post(client, "/v1/memories", body, headers)
    before = snapshot()
    second = post(client, "/v1/memories", dict(reversed(list(body.items()))), headers)
    assert second.status_code == 201
    assert second.json() == first.json()
    assert second.headers["Idempotent-Replayed"] == "true"
    assert snapshot() == before


def test_same_idempotency_key_with_a_different_body_is_a_conflict(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = {**tenant.headers(), "Idempotency-Key": "k-2"}
    post(client, "/v1/memories", {"type": "fact", "scope": "u", "content": "A"}, headers)
    before = snapshot()
    response = post(client, "/v1/memories", {"type": "fact", "scope": "u", "content": "B"}, headers)
    assert response.status_code == 409
    assert problem_slug(response) == "idempotency-key-reused"
    assert snapshot() == before


def test_idempotency_keys_belong_to_one_principal(client: TestClient, tenant: Tenant) -> None:
    body = {"type": "fact", "scope": "u", "content": "A"}
    first = post(client, "/v1/memories", body, {**tenant.headers("writer"), "Idempotency-Key": "k"})
    second = post(
        client, "/v1/memories", body, {**tenant.headers("writer"), "Idempotency-Key": "k"}
    )
    assert second.status_code == 201
    assert second.json()["id"] != first.json()["id"]


def test_identical_content_is_stored_once_per_tenant(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    text = "The same sentence, written three times."
    observe(client, tenant.headers(), text)
    before = snapshot()
    observe(client, tenant.headers(), text)
    assert snapshot()["payloads"] == before["payloads"]
    observe(client, other_tenant.headers(), text)
    assert snapshot()["payloads"] == before["payloads"] + 1
