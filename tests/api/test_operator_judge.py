"""A person as the forgetting pass's judge: items that can be answered as they are
listed, verdicts by ref, a run that queues its items, and the floor that keeps
unrelated memories from any judge."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, index_until_caught_up

PAIRS = (
    ("I run 5K in 27:12, my personal best.", "2023-05-25T20:21:00Z"),
    ("My new 5K personal best is 25:50.", "2023-05-27T10:00:00Z"),
)


def stale_memory(
    client: TestClient, tenant: Tenant, text: str, when: str, **fields: Any
) -> dict[str, Any]:
    """A memory formed from an observation captured at ``when`` (from ``test``)."""
    observation = client.post(
        "/v1/observations",
        json={"content": text, "captured_at": when, "source": "chat:test"},
        headers=tenant.headers(),
    )
    assert observation.status_code == 201, observation.text
    evidence = [{"observation_id": observation.json()["id"], "start": 0, "end": len(text)}]
    return remember(
        client, tenant.headers(), content=text, evidence=evidence, **{"type": "fact", **fields}
    )


def opt_in(client: TestClient, tenant: Tenant) -> None:
    body = {"enabled": True, "daily_calls": 10, "daily_tokens": 100_000}
    assert client.put("/v1/tenant/judgment", json=body, headers=tenant.headers()).is_success


def listing(
    client: TestClient, tenant: Tenant, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = client.get("/v1/forgetting/items", headers=headers or tenant.headers("reader"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_items_carry_ids_scope_project_times_and_evidence_when_texts_repeat(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    made = {
        scope: [
            stale_memory(client, tenant, t, w, scope=scope, project="running") for t, w in PAIRS
        ]
        for scope in ("user", "team")
    }
    index_until_caught_up(runtime, tenant.id)
    items = listing(client, tenant)["items"]
    pairs = [i for i in items if i["kind"] == "pair"]
    assert len(pairs) == 2  # one per scope: the same texts, two answers
    for pair in pairs:
        scope = pair["older"]["scope"]
        older, newer = made[scope]
        assert (pair["older"]["memoryId"], pair["newer"]["memoryId"]) == (older["id"], newer["id"])
        assert pair["newer"]["scope"] == scope and pair["older"]["project"] == "running"
        assert pair["older"]["recordedAt"] == "2023-05-25T20:21:00Z"
        [evidence] = pair["older"]["evidence"]
        assert evidence["source"] == "chat:test" and evidence["text"] == PAIRS[0][0]
        assert evidence["captured_at"].startswith("2023-05-25T20:21")
    singles = [i for i in items if i["kind"] == "single"]
    assert singles and all("memoryId" in s["memory"] and "scope" in s["memory"] for s in singles)


def test_a_verdict_names_its_item_by_ref_and_a_moved_listing_is_refused(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    older, newer = (stale_memory(client, tenant, t, w) for t, w in PAIRS)
    index_until_caught_up(runtime, tenant.id)
    listed = listing(client, tenant)
    [pair] = [i for i in listed["items"] if i["kind"] == "pair"]
    verdict = {"ref": pair["ref"], "action": "supersede", "confidence": 0.95}

    before = snapshot()
    unnamed = post(client, "/v1/forgetting/verdicts", {"verdicts": [verdict]}, tenant.headers())
    assert unnamed.status_code == 422 and problem_slug(unnamed) == "invalid-input"
    both = {**verdict, "memory_id": older["id"]}
    twice = post(client, "/v1/forgetting/verdicts", {"verdicts": [both]}, tenant.headers())
    assert twice.status_code == 422
    stale = {"verdicts": [verdict], "items_digest": "0" * 16}
    moved = post(client, "/v1/forgetting/verdicts", stale, tenant.headers())
    assert moved.status_code == 409 and problem_slug(moved) == "items-changed"
    unknown = {"verdicts": [{**verdict, "ref": "p99"}], "items_digest": listed["items_digest"]}
    assert problem_slug(post(client, "/v1/forgetting/verdicts", unknown, tenant.headers())) == (
        "invalid-input"
    )
    assert snapshot() == before

    body = {"verdicts": [verdict], "items_digest": listed["items_digest"]}
    recorded = post(client, "/v1/forgetting/verdicts", body, tenant.headers())
    assert recorded.status_code == 201, recorded.text
    [proposal] = client.get("/v1/proposals", headers=tenant.headers("reader")).json()["items"]
    assert (proposal["memory"]["id"], proposal["related"]["id"]) == (older["id"], newer["id"])
    assert proposal["action"] == "supersede" and proposal["changed"] is False
    again = post(client, "/v1/forgetting/verdicts", body, tenant.headers())
    assert problem_slug(again) == "items-changed"  # the answered pair left the listing


def test_with_the_operator_judge_a_run_queues_its_items_and_writes_nothing(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any, monkeypatch: Any
) -> None:
    for text, when in PAIRS:
        stale_memory(client, tenant, text, when)
    index_until_caught_up(runtime, tenant.id)
    opt_in(client, tenant)
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_ENABLED", "true")
    monkeypatch.setenv("PALIMPSEST_JUDGE", "operator")
    reader = tenant.headers("reader")  # its token made before the snapshot
    before = snapshot()
    for dry_run in (True, False):
        ran = post(client, "/v1/forgetting/runs", {"dry_run": dry_run}, tenant.headers())
        assert ran.status_code == 200, ran.text
        report = ran.json()
        assert report["stopped"] is None and report["calls"] == 0
        assert report["items"] == len(listing(client, tenant, reader)["items"]) > 0
        assert report["queued"] == (0 if dry_run else report["items"])
    assert snapshot() == before
    monkeypatch.setenv("PALIMPSEST_JUDGE", "none")
    refused = post(client, "/v1/forgetting/runs", {}, tenant.headers())
    assert refused.status_code == 409 and problem_slug(refused) == "pass-disabled"


@pytest.mark.parametrize("scope", ["user"])
def test_unrelated_memories_are_never_paired_for_a_judge(
    client: TestClient, tenant: Tenant, runtime: Runtime, scope: str
) -> None:
    for text, when in (
        ("The staging database runs PostgreSQL 16 on port 5433.", "2023-03-01T09:00:00Z"),
        ("My daughter's piano recital is in the spring.", "2023-03-02T09:00:00Z"),
    ):
        stale_memory(client, tenant, text, when, scope=scope)
    index_until_caught_up(runtime, tenant.id)
    items = listing(client, tenant)["items"]
    assert items  # both are stale singles, judged alone
    assert [i for i in items if i["kind"] == "pair"] == []
    assert all(s["newer"] == [] for s in items)
