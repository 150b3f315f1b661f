"""``/v1/cycles`` and ``/v1/tenant/forgetting``: who may call them, what bad input
gets, and that a refusal writes nothing."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def test_the_policy_has_documented_defaults_until_an_admin_sets_it(
    client: TestClient, tenant: Tenant
) -> None:
    read = client.get("/v1/tenant/forgetting", headers=tenant.headers("reader"))
    assert read.status_code == 200
    policy = read.json()
    assert policy["version"] == 0 and policy["enabled"] is False
    assert policy["schedule_minutes"] == 60 and policy["auto_archive_decayed"] is False
    assert policy["auto_apply_extractive_merges"] is False
    assert policy["prune_below"] <= policy["fade_below"]

    put = client.put(
        "/v1/tenant/forgetting",
        json={"enabled": True, "weights": {"trust": 0.5}, "half_life_days": {"event": 3}},
        headers=tenant.headers(),
    )
    assert put.status_code == 200, put.text
    assert put.json()["version"] == 1 and put.json()["weights"]["trust"] == 0.5
    again = client.get("/v1/tenant/forgetting", headers=tenant.headers("reader")).json()
    assert again == put.json()
    assert again["half_life_days"]["event"] == 3 and again["half_life_days"]["fact"] == 365


@pytest.mark.parametrize(
    "body",
    [
        {"weights": {"novelty": 1}},
        {"weights": {"trust": -0.5}},
        {"half_life_days": {"event": 0}},
        {"schedule_minutes": 0},
        {"duplicate_floor": 1.5},
        {"enabled": "yes"},
        {"enabled": 1},
        {"surprise": True},
        {"importance_floor": None},
        [],
    ],
)
def test_a_bad_policy_is_refused_whole_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, body: Any
) -> None:
    before = snapshot()
    response = client.put("/v1/tenant/forgetting", json=body, headers=tenant.headers())
    assert response.status_code == 422, response.text
    assert problem_slug(response) in ("invalid-input", "validation-error")
    assert snapshot() == before
    policy = client.get("/v1/tenant/forgetting", headers=tenant.headers("reader")).json()
    assert policy["version"] == 0


@pytest.mark.parametrize("role", ["reader", "writer"])
def test_only_an_admin_sets_the_policy_or_runs_a_cycle(
    client: TestClient, tenant: Tenant, snapshot: Any, role: str
) -> None:
    headers = tenant.headers(role)
    before = snapshot()
    for method, path, body in (
        ("PUT", "/v1/tenant/forgetting", {"enabled": True}),
        ("POST", "/v1/cycles", {}),
        ("POST", "/v1/cycles", {"dry_run": True}),
    ):
        refused = client.request(method, path, json=body, headers=headers)
        assert refused.status_code == 403, (method, path, refused.text)
        assert problem_slug(refused) == "forbidden"
        anonymous = client.request(method, path, json=body)
        assert anonymous.status_code == 401 and problem_slug(anonymous) == "unauthenticated"
    assert snapshot() == before


def test_a_cycle_is_recorded_and_read_back_by_its_tenant_only(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    remember(client, tenant.headers("writer"), type="note", content="Try the new linter.")
    drain_until_caught_up(client.app.state.runtime)  # type: ignore[attr-defined]
    dry = post(client, "/v1/cycles", {"dry_run": True}, tenant.headers())
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and len(dry.json()["scores"]) == 1
    assert (
        client.get(f"/v1/cycles/{dry.json()['cycle_id']}", headers=tenant.headers()).status_code
        == 404
    )

    ran = post(client, "/v1/cycles", {}, tenant.headers())
    assert ran.status_code == 200, ran.text
    report = ran.json()
    assert report["counts"] == {"keep": 1, "fade": 0, "prune": 0}
    assert report["policy_version"] == 0 and "scores" not in report
    read = client.get(f"/v1/cycles/{report['cycle_id']}", headers=tenant.headers("reader"))
    assert read.status_code == 200
    assert {k: read.json()[k] for k in ("counts", "by_type", "snapshot_at", "policy_version")} == {
        k: report[k] for k in ("counts", "by_type", "snapshot_at", "policy_version")
    }
    stranger = client.get(f"/v1/cycles/{report['cycle_id']}", headers=other_tenant.headers())
    assert stranger.status_code == 404 and problem_slug(stranger) == "not-found"


@pytest.mark.parametrize("body", [{"dry_run": "yes"}, {"dry_run": 1}, {"dryrun": True}, []])
def test_a_bad_cycle_request_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, body: Any
) -> None:
    before = snapshot()
    response = post(client, "/v1/cycles", body, tenant.headers())
    assert response.status_code == 422, response.text
    assert snapshot() == before


def test_reading_a_cycle_needs_a_token_and_a_uuid(client: TestClient, tenant: Tenant) -> None:
    assert problem_slug(client.get(f"/v1/cycles/{uuid4()}")) == "unauthenticated"
    assert problem_slug(client.get("/v1/tenant/forgetting")) == "unauthenticated"
    bad = client.get("/v1/cycles/not-a-uuid", headers=tenant.headers("reader"))
    assert bad.status_code == 422
    missing = client.get(f"/v1/cycles/{uuid4()}", headers=tenant.headers("reader"))
    assert missing.status_code == 404 and problem_slug(missing) == "not-found"


def test_a_tenants_policy_is_its_own(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    put = client.put("/v1/tenant/forgetting", json={"enabled": True}, headers=tenant.headers())
    assert put.status_code == 200
    theirs = client.get("/v1/tenant/forgetting", headers=other_tenant.headers("reader")).json()
    assert theirs["enabled"] is False and theirs["version"] == 0


def test_a_patch_changes_only_the_fields_it_names(client: TestClient, tenant: Tenant) -> None:
    tuned = {"fade_below": 0.5, "prune_below": 0.2, "weights": {"trust": 0.4}, "enabled": True}
    assert client.put("/v1/tenant/forgetting", json=tuned, headers=tenant.headers()).is_success
    patched = client.patch(
        "/v1/tenant/forgetting",
        json={"enabled": False, "weights": {"recency": 0.5}},
        headers=tenant.headers(),
    )
    assert patched.status_code == 200, patched.text
    policy = patched.json()
    assert policy["enabled"] is False and policy["version"] == 2
    assert (policy["fade_below"], policy["prune_below"]) == (0.5, 0.2)
    assert policy["weights"]["trust"] == 0.4 and policy["weights"]["recency"] == 0.5
    assert client.get("/v1/tenant/forgetting", headers=tenant.headers("reader")).json() == policy


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_prune_above_fade_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, method: str
) -> None:
    before = snapshot()
    body = {"prune_below": 0.6, "fade_below": 0.3}
    refused = client.request(method, "/v1/tenant/forgetting", json=body, headers=tenant.headers())
    assert refused.status_code == 422, refused.text
    assert problem_slug(refused) == "inconsistent-policy"
    # A PATCH is checked merged: prune_below alone above the current fade_below too.
    alone = client.patch(
        "/v1/tenant/forgetting", json={"prune_below": 0.9}, headers=tenant.headers()
    )
    assert problem_slug(alone) == "inconsistent-policy"
    assert snapshot() == before


def test_only_an_admin_patches_the_policy(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = {role: tenant.headers(role) for role in ("reader", "writer")}
    before = snapshot()
    for role in ("reader", "writer"):
        refused = client.patch(
            "/v1/tenant/forgetting", json={"enabled": True}, headers=headers[role]
        )
        assert refused.status_code == 403 and problem_slug(refused) == "forbidden"
    bad = client.patch("/v1/tenant/forgetting", json={"surprise": 1}, headers=tenant.headers())
    assert bad.status_code == 422
    assert snapshot() == before


def test_a_cycle_report_names_its_memories_by_text_and_explains_its_factors(
    client: TestClient, tenant: Tenant
) -> None:
    note = remember(client, tenant.headers("writer"), type="note", content="Rename the bucket.")
    drain_until_caught_up(client.app.state.runtime)  # type: ignore[attr-defined]
    policy = {"fade_below": 1.0, "prune_below": 1.0}
    assert client.put("/v1/tenant/forgetting", json=policy, headers=tenant.headers()).is_success
    dry = post(client, "/v1/cycles", {"dry_run": True}, tenant.headers()).json()
    assert set(dry["factors_explained"]) >= {"importance", "recency", "scope", "trust"}
    assert dry["memories"][note["id"]]["text"] == "Rename the bucket."
    ran = post(client, "/v1/cycles", {}, tenant.headers()).json()
    read = client.get(f"/v1/cycles/{ran['cycle_id']}", headers=tenant.headers("reader")).json()
    for report in (ran, read):
        [proposed] = report["proposed"]
        assert proposed["memory_id"] == note["id"] and proposed["action"] == "decay"
        assert report["memories"][note["id"]]["text"] == "Rename the bucket."
        assert report["buckets_explained"]["prune"]
