"""Proposals: verdicts recorded for review, and a person applying or rejecting them.

An operator is the judge here (``POST /v1/forgetting/verdicts``); the
forgetting pass records its verdicts through the same write.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _verdicts(
    client: TestClient,
    tenant: Tenant,
    *verdicts: dict[str, Any],
    role: str = "writer",
    headers: dict[str, str] | None = None,
) -> Any:
    body = {"verdicts": list(verdicts)}
    return post(client, "/v1/forgetting/verdicts", body, headers or tenant.headers(role))


def _propose(client: TestClient, tenant: Tenant, **verdict: Any) -> str:
    response = _verdicts(client, tenant, {"confidence": 0.99, **verdict})
    assert response.status_code == 201, response.text
    [result] = response.json()["results"]
    assert result["status"] == "proposed"
    return str(result["id"])


def _listed(client: TestClient, tenant: Tenant, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/proposals", headers=tenant.headers("reader"), params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _memory(client: TestClient, tenant: Tenant, memory_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/memories/{memory_id}?wait=5", headers=tenant.headers())
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def test_confident_verdicts_are_listed_and_the_rest_dismissed(
    client: TestClient, tenant: Tenant
) -> None:
    old = remember(client, tenant.headers(), content="Uses Python 3.9")
    other = remember(client, tenant.headers(), content="Prefers tea")
    response = _verdicts(
        client,
        tenant,
        {"memory_id": old["id"], "action": "archive", "confidence": 0.97, "note": "obsolete"},
        {"memory_id": other["id"], "action": "archive", "confidence": 0.4},
        {"memory_id": other["id"], "action": "keep", "confidence": 0.99},
    )
    assert response.status_code == 201, response.text
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == ["proposed", "dismissed", "dismissed"]
    [listed] = _listed(client, tenant)
    assert listed["memory"]["id"] == old["id"]
    assert listed["memory"]["content"] == "Uses Python 3.9"
    assert listed["probability"] == 0.97 and listed["action"] == "archive"
    assert listed["changed"] is False
    assert len(_listed(client, tenant, status="dismissed")) == 2
    assert _listed(client, tenant, action="supersede") == []


def test_applying_an_archive_forgets_the_memory_naming_the_proposal(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    old = remember(client, tenant.headers(), content="Deploys on Fridays")
    proposal = _propose(client, tenant, memory_id=old["id"], action="archive")
    applied = post(
        client, f"/v1/proposals/{proposal}/apply", {"reason": "agreed"}, tenant.headers("writer")
    )
    assert applied.status_code == 201, applied.text
    decision = applied.json()
    assert decision["kind"] == "apply_proposal" and decision["reason"] == "agreed"
    assert {"op": "forget", "memory_id": old["id"]} in decision["accepted"]
    drain_until_caught_up(runtime)
    archived = _memory(client, tenant, old["id"])["belief"]["labels"]["archived"]
    assert archived["reason"] == f"proposal {proposal}: agreed"
    assert archived["decision_id"] == decision["id"]
    assert _listed(client, tenant) == []
    [done] = _listed(client, tenant, status="applied")
    assert done["decision_id"] == decision["id"]
    # Applied once: a second answer is refused, and writes nothing
    again = post(client, f"/v1/proposals/{proposal}/apply", {}, tenant.headers("writer"))
    assert again.status_code == 409 and problem_slug(again) == "proposal-closed"


def test_applying_a_supersede_adds_the_edge_from_the_newer_memory(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    old = remember(client, tenant.headers(), content="Runs 5K in 27:12")
    new = remember(client, tenant.headers(), content="Runs 5K in 25:50")
    proposal = _propose(
        client, tenant, memory_id=old["id"], action="supersede", related_memory_id=new["id"]
    )
    [listed] = _listed(client, tenant)
    assert listed["related"]["content"] == "Runs 5K in 25:50"
    applied = post(client, f"/v1/proposals/{proposal}/apply", {}, tenant.headers("writer"))
    assert applied.status_code == 201, applied.text
    drain_until_caught_up(runtime)
    belief = _memory(client, tenant, old["id"])["belief"]
    assert belief["labels"]["superseded_by"] == [new["id"]]


def test_a_conflict_is_recorded_or_resolved_inline(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    a = remember(client, tenant.headers(), type="fact", content="Office is in Leeds")
    b = remember(client, tenant.headers(), type="fact", content="Office is in York")
    reviewed = _propose(
        client, tenant, memory_id=a["id"], action="conflict", related_memory_id=b["id"]
    )
    only = post(client, f"/v1/proposals/{reviewed}/apply", {}, tenant.headers("writer")).json()
    assert [op["op"] for op in only["accepted"]] == ["apply_proposal"]
    resolved = _propose(
        client, tenant, memory_id=a["id"], action="conflict", related_memory_id=b["id"]
    )
    done = post(
        client,
        f"/v1/proposals/{resolved}/apply",
        {"resolution": "archive_older", "reason": "moved"},
        tenant.headers("writer"),
    )
    assert done.status_code == 201, done.text
    drain_until_caught_up(runtime)
    assert _memory(client, tenant, a["id"])["belief"]["labels"]["archived"] is not None
    assert _memory(client, tenant, b["id"])["belief"]["labels"]["archived"] is None


def test_a_proposal_whose_memory_changed_is_stale_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    old = remember(client, tenant.headers(), content="Sprint is two weeks")
    proposal = _propose(client, tenant, memory_id=old["id"], action="archive")
    post(
        client,
        f"/v1/memories/{old['id']}/versions",
        {"content": "Sprint is three weeks"},
        tenant.headers(),
    )
    [listed] = _listed(client, tenant)
    assert listed["changed"] is True and listed["memory"]["content"] == "Sprint is three weeks"
    writer = tenant.headers("writer")  # a new token is a write: issued before the snapshot
    before = snapshot()
    stale = post(client, f"/v1/proposals/{proposal}/apply", {}, writer)
    assert stale.status_code == 409 and problem_slug(stale) == "stale-proposal"
    assert snapshot() == before


def test_a_memory_pinned_since_the_verdict_is_never_archived_by_applying_it(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    # Given an archive, a supersede and a conflict to resolve, each about a memory
    # that a person pinned after the verdict
    writer = tenant.headers("writer")
    old = remember(client, writer, content="Uses Mercurial")["id"]
    slower = remember(client, writer, content="Runs 10K in 55:00")["id"]
    faster = remember(client, writer, content="Runs 10K in 52:10")["id"]
    leeds = remember(client, writer, type="fact", content="Office is in Leeds")["id"]
    york = remember(client, writer, type="fact", content="Office is in York")["id"]
    archive = _propose(client, tenant, memory_id=old, action="archive")
    supersede = _propose(
        client, tenant, memory_id=slower, action="supersede", related_memory_id=faster
    )
    conflict = _propose(client, tenant, memory_id=leeds, action="conflict", related_memory_id=york)
    for pinned in (old, slower, leeds):
        assert post(client, f"/v1/memories/{pinned}/pin", {}, writer).status_code in (200, 201)
    before = snapshot()

    # When a person applies each, the conflict resolved by archiving the older
    refusals = [
        post(client, f"/v1/proposals/{proposal}/apply", body, writer)
        for proposal, body in (
            (archive, {}),
            (supersede, {}),
            (conflict, {"resolution": "archive_older"}),
            (conflict, {"resolution": "supersede"}),
        )
    ]

    # Then the pin stands: each is stale, and nothing was written
    assert [r.status_code for r in refusals] == [409] * 4, [r.text for r in refusals]
    assert {problem_slug(r) for r in refusals} == {"stale-proposal"}
    assert snapshot() == before
    drain_until_caught_up(runtime)
    for pinned in (old, slower, leeds):
        labels = _memory(client, tenant, pinned)["belief"]["labels"]
        assert labels["pinned"] is True and labels["archived"] is None, labels
    # Reviewing a conflict archives nothing, so a pin does not stand in its way
    reviewed = post(client, f"/v1/proposals/{conflict}/apply", {}, writer)
    assert reviewed.status_code == 201, reviewed.text


@pytest.mark.slow
def test_a_rejection_needs_a_reason_and_is_final(client: TestClient, tenant: Tenant) -> None:
    old = remember(client, tenant.headers(), content="Likes jazz")
    proposal = _propose(client, tenant, memory_id=old["id"], action="archive")
    no_reason = post(client, f"/v1/proposals/{proposal}/reject", {}, tenant.headers("writer"))
    assert no_reason.status_code == 422 and problem_slug(no_reason) == "validation-error"
    rejected = post(
        client,
        f"/v1/proposals/{proposal}/reject",
        {"reason": "still true"},
        tenant.headers("writer"),
    )
    assert rejected.status_code == 201 and rejected.json()["kind"] == "reject_proposal"
    assert _listed(client, tenant) == []
    assert _listed(client, tenant, status="rejected")[0]["id"] == proposal
    applied = post(client, f"/v1/proposals/{proposal}/apply", {}, tenant.headers("writer"))
    assert applied.status_code == 409 and problem_slug(applied) == "proposal-closed"
    assert _memory(client, tenant, old["id"])["status"] in ("current", "pending")


def test_one_open_proposal_per_memory_and_action(client: TestClient, tenant: Tenant) -> None:
    old = remember(client, tenant.headers(), content="Uses Jenkins")
    _propose(client, tenant, memory_id=old["id"], action="archive")
    again = _verdicts(
        client, tenant, {"memory_id": old["id"], "action": "archive", "confidence": 0.99}
    )
    assert again.status_code == 409 and problem_slug(again) == "conflict"
    assert len(_listed(client, tenant)) == 1


def test_event_memories_are_never_superseded(client: TestClient, tenant: Tenant) -> None:
    a = remember(client, tenant.headers(), type="event", content="Stand-up on Monday")
    b = remember(client, tenant.headers(), type="event", content="Stand-up on Tuesday")
    proposal = _propose(
        client, tenant, memory_id=a["id"], action="supersede", related_memory_id=b["id"]
    )
    refused = post(client, f"/v1/proposals/{proposal}/apply", {}, tenant.headers("writer"))
    assert refused.status_code == 422 and problem_slug(refused) == "edge-not-allowed"
    assert len(_listed(client, tenant)) == 1


def test_a_reader_reviews_but_cannot_decide_or_judge(client: TestClient, tenant: Tenant) -> None:
    old = remember(client, tenant.headers(), content="Uses Trello")
    proposal = _propose(client, tenant, memory_id=old["id"], action="archive")
    reader = tenant.headers("reader")
    assert client.get(f"/v1/proposals/{proposal}", headers=reader).status_code == 200
    for path in (f"/v1/proposals/{proposal}/apply", f"/v1/proposals/{proposal}/reject"):
        refused = post(client, path, {"reason": "x"}, reader)
        assert refused.status_code == 403 and problem_slug(refused) == "forbidden"
    judged = _verdicts(
        client, tenant, {"memory_id": old["id"], "action": "keep", "confidence": 1}, role="reader"
    )
    assert judged.status_code == 403


def test_bad_verdicts_are_refused_and_write_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    old = remember(client, tenant.headers(), content="Uses Slack")
    writer = tenant.headers("writer")  # a new token is a write: issued before the snapshot
    before = snapshot()
    for verdict in (
        {"memory_id": old["id"], "action": "archive", "confidence": 1.5},
        {"memory_id": old["id"], "action": "delete", "confidence": 0.9},
        {"memory_id": old["id"], "action": "supersede", "confidence": 0.9},
        {"memory_id": old["id"], "action": "archive", "confidence": "0.9"},
        {
            "memory_id": old["id"],
            "action": "conflict",
            "confidence": 0.9,
            "related_memory_id": old["id"],
        },
    ):
        refused = _verdicts(client, tenant, verdict, headers=writer)
        assert refused.status_code == 422, (verdict, refused.text)
    missing = _verdicts(
        client,
        tenant,
        {"memory_id": old["id"], "action": "archive", "confidence": 0.99},
        {
            "memory_id": "00000000-0000-4000-8000-000000000000",
            "action": "archive",
            "confidence": 0.99,
        },
        headers=writer,
    )
    assert missing.status_code == 404 and problem_slug(missing) == "not-found"
    assert snapshot() == before
    assert client.get("/v1/proposals?status=opened", headers=tenant.headers()).status_code == 422


def test_the_collapse_guard_stops_a_days_archivals_until_an_admin_confirms(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: Any
) -> None:
    monkeypatch.setenv("PALIMPSEST_COLLAPSE_SHARE", "0")
    monkeypatch.setenv("PALIMPSEST_COLLAPSE_MINIMUM", "1")
    ids = [remember(client, tenant.headers(), content=f"routine {i}")["id"] for i in range(3)]
    drain_until_caught_up(runtime)
    first, second = (_propose(client, tenant, memory_id=i, action="archive") for i in ids[:2])
    writer = tenant.headers("writer")
    assert post(client, f"/v1/proposals/{first}/apply", {}, writer).status_code == 201
    drain_until_caught_up(runtime)
    guarded = post(client, f"/v1/proposals/{second}/apply", {}, writer)
    assert guarded.status_code == 409 and problem_slug(guarded) == "collapse-guard"
    by_writer = post(client, f"/v1/proposals/{second}/apply", {"confirm_bulk": True}, writer)
    assert by_writer.status_code == 403
    confirmed = post(
        client, f"/v1/proposals/{second}/apply", {"confirm_bulk": True}, tenant.headers()
    )
    assert confirmed.status_code == 201, confirmed.text
    # A rejection archives nothing: the guard never stands in its way
    third = _propose(client, tenant, memory_id=ids[2], action="archive")
    rejected = post(client, f"/v1/proposals/{third}/reject", {"reason": "keep it"}, writer)
    assert rejected.status_code == 201


def test_export_carries_the_proposals_and_their_decisions(
    client: TestClient, tenant: Tenant
) -> None:
    old = remember(client, tenant.headers(), content="Uses Bitbucket")
    proposal = _propose(client, tenant, memory_id=old["id"], action="archive")
    post(client, f"/v1/proposals/{proposal}/reject", {"reason": "still used"}, tenant.headers())
    exported = client.get("/v1/tenant/export", headers=tenant.headers())
    assert exported.status_code == 200
    events = [json.loads(line) for line in exported.text.splitlines()]
    proposed = [e for e in events if e.get("type") == "RetentionProposed"]
    assert [e["aggregate_id"] for e in proposed] == [proposal]
    assert proposed[0]["data"]["memory_id"] == old["id"]
    assert any(e.get("type") == "RetentionProposalDecided" for e in events)


def test_a_bad_judgment_policy_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    admin = tenant.headers()
    before = snapshot()
    for body in (
        {"enabled": "yes"},
        {"enabled": True, "daily_calls": -1},
        {"enabled": True, "daily_tokens": 10**12},
        {"enabled": True, "daily_calls": 1.5},
        {"enabled": True, "extra": 1},
    ):
        refused = client.put("/v1/tenant/judgment", json=body, headers=admin)
        assert refused.status_code == 422, (body, refused.text)
        assert problem_slug(refused) == "validation-error"
    assert snapshot() == before
    runs = client.post("/v1/forgetting/runs", json={"dry_run": 1}, headers=admin)
    assert runs.status_code == 422
