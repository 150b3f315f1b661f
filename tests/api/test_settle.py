"""The caller settles a potential conflict it was told of (issue 44, item 1): this
memory supersedes that one (an edge, as the edges API records it), or both stand (a
``dismiss_conflict`` decision with its reason, as the caller); refused when stale.
A new memory may also name what it supersedes, recorded in the same write."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from palimpsest.domain.decision import dismissal_key
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up

_ABSENT = "00000000-0000-4000-8000-000000000000"


def _settle(
    client: TestClient,
    headers: dict[str, str],
    memory_id: str,
    other_id: str,
    resolution: str,
    reason: str = "the user said so",
) -> Any:
    return post(
        client,
        f"/v1/memories/{memory_id}/candidates/{other_id}/settle",
        {"resolution": resolution, "reason": reason},
        headers,
    )


def _labels(client: TestClient, headers: dict[str, str], memory_id: str) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}", headers=headers, params={"wait": 5}).json()
    assert answer["status"] == "current", answer
    return dict(answer["belief"]["labels"])


def test_settling_supersedes_archives_the_older_one_and_replays(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers("writer")
    old = remember(client, headers, content="Prefers dark mode")
    new = remember(client, headers, content="Now prefers light mode")

    settled = _settle(client, headers, new["id"], old["id"], "supersedes")
    assert settled.status_code == 201, settled.text
    body = settled.json()
    assert body["resolution"] == "supersedes" and body["edge_id"] and not body["replayed"]
    drain_until_caught_up(runtime)
    assert _labels(client, headers, old["id"])["archived"]["reason"] == "superseded"
    decision = client.get(f"/v1/decisions/{body['decision_id']}", headers=headers).json()
    assert decision["kind"] == "add_edge" and decision["reason"] == "the user said so"

    again = _settle(client, headers, new["id"], old["id"], "supersedes", reason="retried")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["decision_id"] == body["decision_id"]
    # Settled: both standing is no longer what it means, either way round.
    for memory_id, other_id in ((new["id"], old["id"]), (old["id"], new["id"])):
        refused = _settle(client, headers, memory_id, other_id, "both_stand")
        assert refused.status_code == 409 and problem_slug(refused) == "already-settled"
    reverse = _settle(client, headers, old["id"], new["id"], "supersedes")
    assert reverse.status_code == 409 and problem_slug(reverse) == "already-settled"


def test_both_stand_is_a_decision_of_the_caller_with_its_reason(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    token = tenant.token("writer")
    headers = {"Authorization": f"Bearer {token}"}
    tea = remember(client, headers, content="Likes green tea")
    coffee = remember(client, headers, content="Likes black coffee")

    settled = _settle(client, headers, coffee["id"], tea["id"], "both_stand", "likes both")
    assert settled.status_code == 201, settled.text
    body = settled.json()
    assert body["edge_id"] is None and body["replayed"] is False
    decision = client.get(f"/v1/decisions/{body['decision_id']}", headers=headers).json()
    caller = authenticate(runtime.log, token)
    assert decision["kind"] == "dismiss_conflict" and decision["reason"] == "likes both"
    assert decision["principal_id"] == str(caller.principal_id)
    assert {i["id"] for i in decision["inputs"]} == {tea["id"], coffee["id"]}
    assert {s["memory_id"] for s in decision["seen"]} == {tea["id"], coffee["id"]}
    # Its logical key is the pair's, whichever is named first: what recall looks up.
    assert decision["logical_key"] == dismissal_key(UUID(tea["id"]), UUID(coffee["id"]))

    swapped = _settle(client, headers, tea["id"], coffee["id"], "both_stand", "again")
    assert swapped.status_code == 200 and swapped.json()["replayed"] is True
    assert swapped.json()["decision_id"] == body["decision_id"]
    refused = _settle(client, headers, coffee["id"], tea["id"], "supersedes")
    assert refused.status_code == 409 and problem_slug(refused) == "already-settled"
    drain_until_caught_up(runtime)
    # Nothing was archived by it.
    assert _labels(client, headers, tea["id"]).get("archived") is None
    assert _labels(client, headers, coffee["id"]).get("archived") is None


def test_a_stale_settlement_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers, reader = tenant.headers("writer"), tenant.headers("reader")
    new = remember(client, headers, content="Standup is at 09:30")
    forgotten = remember(client, headers, content="Standup is at 10:00")
    superseded = remember(client, headers, content="Standup is at 11:00")
    newest = remember(client, headers, content="Standup is at 09:00")
    forgot = post(client, f"/v1/memories/{forgotten['id']}/forget", {"reason": "old"}, headers)
    assert forgot.status_code == 201
    edge = post(
        client,
        f"/v1/memories/{newest['id']}/edges",
        {"kind": "supersedes", "target_id": superseded["id"]},
        headers,
    )
    assert edge.status_code == 201

    before = snapshot()
    cases = {
        "memory-forgotten": _settle(client, headers, new["id"], forgotten["id"], "supersedes"),
        "memory-superseded": _settle(client, headers, new["id"], superseded["id"], "both_stand"),
        "not-found": _settle(client, headers, new["id"], _ABSENT, "both_stand"),
        "invalid-input": _settle(client, headers, new["id"], new["id"], "both_stand"),
    }
    for slug, response in cases.items():
        assert problem_slug(response) == slug, response.text
    assert cases["memory-forgotten"].status_code == 409
    blank = post(
        client,
        f"/v1/memories/{new['id']}/candidates/{forgotten['id']}/settle",
        {"resolution": "both_stand"},
        headers,
    )
    assert blank.status_code == 422 and problem_slug(blank) == "validation-error"
    as_reader = _settle(client, reader, new["id"], forgotten["id"], "both_stand")
    assert as_reader.status_code == 403 and problem_slug(as_reader) == "forbidden"
    assert snapshot()["log_head"] == before["log_head"]


def test_a_new_memory_names_what_it_supersedes_in_the_same_write(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers("writer")
    old = remember(client, headers, content="Prefers dark mode")

    before = snapshot()
    unknown = post(
        client,
        "/v1/memories",
        {"type": "preference", "scope": "user", "content": "x", "supersedes": [_ABSENT]},
        headers,
    )
    assert unknown.status_code == 404 and problem_slug(unknown) == "not-found"
    assert snapshot()["log_head"] == before["log_head"]  # not even the memory

    new = remember(client, headers, content="Prefers light mode", supersedes=[old["id"]])
    [superseded] = new["supersedes"]
    assert superseded["target_id"] == old["id"]
    assert new["position"] == snapshot()["log_head"]  # the write's last event
    drain_until_caught_up(runtime)
    labels = _labels(client, headers, old["id"])
    assert labels["archived"]["reason"] == "superseded"
    assert labels["superseded_by"] == [new["id"]]
    decision = client.get(f"/v1/decisions/{superseded['decision_id']}", headers=headers).json()
    assert decision["kind"] == "add_edge"
