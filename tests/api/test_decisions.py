"""Decisions: withdrawal, retraction, forget/restore/pin, replay, and their explanation."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID, uuid4

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _requested(runtime: Runtime, memory_ids: list[str]) -> dict[str, int]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT memory_id, requested FROM "{schema}".revisions WHERE memory_id = ANY(%s)',
            ([UUID(m) for m in memory_ids],),
        ).fetchall()
    return {str(r[0]): r[1] for r in rows}


def _belief(client: TestClient, memory_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}", headers=headers).json()
    assert answer["status"] == "current", answer
    return dict(answer["belief"])


def test_withdrawing_a_model_revises_exactly_the_memories_it_supported(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs_a = observe(client, headers, "The build uses Python 3.11 everywhere.")
    obs_b = observe(client, headers, "CI pins Python 3.11 as well.")

    only_old = remember(
        client,
        headers,
        content="Python 3.11",
        model_id="judge-1.4",
        evidence=[{"observation_id": obs_a, "start": 0, "end": 9}],
    )
    only_new = remember(
        client,
        headers,
        content="Python 3.11 in CI",
        model_id="judge-2.0",
        evidence=[{"observation_id": obs_b, "start": 0, "end": 9}],
    )
    both = remember(
        client,
        headers,
        content="Python 3.11, twice",
        model_id="judge-1.4",
        evidence=[{"observation_id": obs_a, "start": 4, "end": 9}],
    )
    post(
        client,
        f"/v1/memories/{both['id']}/versions",
        {
            "content": "Python 3.11, twice",
            "model_id": "judge-2.0",
            "evidence": [{"observation_id": obs_b, "start": 0, "end": 9}],
        },
        headers,
    )
    unsupported = remember(client, headers, content="no evidence at all")
    drain_until_caught_up(runtime)
    ids = [only_old["id"], only_new["id"], both["id"], unsupported["id"]]
    before = _requested(runtime, ids)
    beliefs_before = {m: _belief(client, m, headers) for m in ids}

    response = post(client, "/v1/proposers/model=judge-1.4/withdraw", {"reason": "bad"}, headers)
    assert response.status_code == 201, response.text
    decision = response.json()
    assert decision["kind"] == "withdraw_proposer" and decision["replayed"] is False
    after = _requested(runtime, ids)
    revised = {m for m in ids if after[m] != before[m]}
    # "both" cites judge-1.4 only in its first version: its current support is judge-2.0's,
    # yet its contributions changed, so it is revised too; nothing else is.
    assert revised == {only_old["id"], both["id"]}
    assert all(after[m] == decision["position"] for m in revised)

    drain_until_caught_up(runtime)
    assert _belief(client, only_old["id"], headers)["grade"] == "unsupported"
    assert _belief(client, only_new["id"], headers) == beliefs_before[only_new["id"]]
    assert _belief(client, both["id"], headers)["grade"] == "supported"
    assert _belief(client, unsupported["id"], headers) == beliefs_before[unsupported["id"]]


def test_withdrawing_a_proposer_deactivates_its_contributions_only(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    agent = tenant.token("writer", "agent-7")
    agent_headers = {"Authorization": f"Bearer {agent}"}
    headers = tenant.headers()
    obs = observe(client, headers, "Deploys happen on Tuesdays.")
    theirs = remember(
        client,
        agent_headers,
        content="Deploys on Tuesday",
        evidence=[{"observation_id": obs, "start": 0, "end": 7}],
    )
    mine = remember(
        client,
        headers,
        content="Deploys on Tuesdays",
        evidence=[{"observation_id": obs, "start": 0, "end": 7}],
    )
    proposer = client.get(f"/v1/memories/{theirs['id']}/versions", headers=headers).json()[
        "versions"
    ][0]["principal_id"]
    unused = post(client, f"/v1/proposers/{proposer}/withdraw?model=judge-9", {}, headers)
    assert unused.status_code == 404 and problem_slug(unused) == "not-found"  # no such model
    response = post(client, f"/v1/proposers/{proposer}/withdraw", {}, headers)
    assert response.status_code == 201, response.text
    [op] = response.json()["accepted"]
    assert op["memory_id"] == theirs["id"] and op["op"] == "deactivate_contribution"
    drain_until_caught_up(runtime)
    assert _belief(client, theirs["id"], headers)["grade"] == "unsupported"
    assert _belief(client, mine["id"], headers)["grade"] == "supported"


def test_a_retracted_observation_stays_readable_and_cannot_be_cited_again(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "The office closes at six.")
    memory = remember(
        client,
        headers,
        content="Office closes at 6",
        evidence=[{"observation_id": obs, "start": 4, "end": 10}],
    )
    retracted = post(client, f"/v1/observations/{obs}/retract", {"reason": "wrong"}, headers)
    assert retracted.status_code == 201, retracted.text
    ops = {o["op"] for o in retracted.json()["accepted"]}
    assert ops == {"retract_observation", "deactivate_contribution"}
    content = client.get(f"/v1/observations/{obs}/content", headers=headers)
    assert content.status_code == 200 and content.text == "The office closes at six."
    versions = client.get(f"/v1/memories/{memory['id']}/versions", headers=headers).json()
    assert versions["versions"][0]["content"] == "Office closes at 6"
    cite_again = post(
        client,
        "/v1/memories",
        {
            "type": "fact",
            "scope": "user",
            "content": "closes at six",
            "evidence": [{"observation_id": obs, "start": 4, "end": 10}],
        },
        headers,
    )
    assert cite_again.status_code == 422 and problem_slug(cite_again) == "evidence-retracted"
    drain_until_caught_up(runtime)
    assert _belief(client, memory["id"], headers)["grade"] == "unsupported"


def test_replaying_a_decision_applies_nothing_and_returns_the_original_outcome(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers)
    memory = remember(client, headers, evidence=[{"observation_id": obs, "start": 0, "end": 8}])
    remember(
        client,
        headers,
        model_id="judge-replay",
        evidence=[{"observation_id": observe(client, headers), "start": 0, "end": 8}],
    )
    cases = [
        (f"/v1/memories/{memory['id']}/forget", {"reason": "stale"}),
        (f"/v1/memories/{memory['id']}/pin", {}),
        (f"/v1/observations/{obs}/retract", {}),
        ("/v1/proposers/model=judge-replay/withdraw", {}),
    ]
    for path, body in cases:
        first = post(client, path, body, headers)
        assert first.status_code == 201, (path, first.text)
        before = snapshot()
        again = post(client, path, body, headers)
        assert again.status_code == 200, (path, again.text)
        assert again.json() == {**first.json(), "replayed": True}
        assert snapshot() == before, path  # nothing appended, no row written

    other_reason = post(client, f"/v1/memories/{memory['id']}/forget", {"reason": "other"}, headers)
    assert other_reason.status_code == 409 and problem_slug(other_reason) == "conflict"
    # After a restore, the same forget is a new decision, not a replay.
    assert post(client, f"/v1/memories/{memory['id']}/restore", {}, headers).status_code == 201
    refreshed = post(client, f"/v1/memories/{memory['id']}/forget", {"reason": "stale"}, headers)
    assert refreshed.status_code == 201 and refreshed.json()["replayed"] is False


def test_restore_reverses_only_a_forget(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    old = remember(client, headers)
    new = remember(client, headers, content="Prefers light mode")
    post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    refused = post(client, f"/v1/memories/{old['id']}/restore", {}, headers)
    assert refused.status_code == 409
    assert problem_slug(refused) == "structurally-archived"


def test_a_decision_explains_itself_and_only_to_its_tenant(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    forgotten = post(
        client, f"/v1/memories/{memory['id']}/forget", {"reason": "duplicate"}, headers
    ).json()
    explained = client.get(f"/v1/decisions/{forgotten['id']}", headers=headers)
    assert explained.status_code == 200
    body = explained.json()
    assert body["kind"] == "forget" and body["params"] == {"reason": "duplicate"}
    assert body["inputs"] == [{"kind": "memory", "id": memory["id"]}]
    assert body["seen"] == [
        {
            "memory_id": memory["id"],
            "version_id": memory["version_id"],
            "content_digest": body["seen"][0]["content_digest"],
        }
    ]
    assert body["seen"][0]["content_digest"].startswith("sha256:")
    assert body["accepted"] == [{"op": "forget", "memory_id": memory["id"]}]
    assert body["policy_version"] and body["position"] == forgotten["position"]
    assert body["proposer_id"] == body["principal_id"]
    elsewhere = client.get(f"/v1/decisions/{forgotten['id']}", headers=other_tenant.headers())
    assert elsewhere.status_code == 404


def test_readers_cannot_decide_and_bad_decisions_write_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    reader = tenant.headers("reader")
    obs = observe(client, headers)
    memory = remember(client, headers)
    before = snapshot()
    for path, body in (
        (f"/v1/memories/{memory['id']}/forget", {"reason": "x"}),
        (f"/v1/memories/{memory['id']}/pin", {}),
        (f"/v1/memories/{memory['id']}/unpin", {}),
        (f"/v1/memories/{memory['id']}/restore", {}),
        (f"/v1/observations/{obs}/retract", {}),
        ("/v1/proposers/model=m/withdraw", {}),
    ):
        response = post(client, path, body, reader)
        assert response.status_code == 403, path
        assert problem_slug(response) == "forbidden"
    for path, body, status in (
        (f"/v1/memories/{memory['id']}/forget", {}, 422),
        (f"/v1/memories/{memory['id']}/forget", {"reason": "   "}, 422),
        (f"/v1/memories/{memory['id']}/forget", {"reason": "x" * 1001}, 422),
        (f"/v1/memories/{memory['id']}/unpin", {}, 409),
        (f"/v1/memories/{memory['id']}/restore", {}, 409),
        (f"/v1/memories/{obs}/pin", {}, 404),
        ("/v1/observations/00000000-0000-0000-0000-000000000000/retract", {}, 404),
        ("/v1/proposers/someone/withdraw", {}, 422),
        ("/v1/proposers/model=/withdraw", {}, 422),
        # The path's and the body's models narrow together: no contribution matches.
        ("/v1/proposers/model=a/withdraw", {"model": "b"}, 404),
    ):
        response = post(client, path, body, headers)
        assert response.status_code == status, (path, body, response.text)
        problem_slug(response)
    assert snapshot() == before


def test_no_token_or_another_tenant_decides_nothing(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers)
    memory = remember(client, headers)
    intruder = other_tenant.headers("writer")
    verbs = [
        (f"/v1/memories/{memory['id']}/forget", {"reason": "x"}),
        (f"/v1/memories/{memory['id']}/restore", {}),
        (f"/v1/memories/{memory['id']}/pin", {}),
        (f"/v1/memories/{memory['id']}/unpin", {}),
        (f"/v1/memories/{memory['id']}/edges", {"kind": "extends", "target_id": memory["id"]}),
        (f"/v1/observations/{obs}/retract", {}),
    ]
    before = snapshot()
    for path, body in verbs:
        anonymous = post(client, path, body, {})
        assert anonymous.status_code == 401, path
        assert problem_slug(anonymous) == "unauthenticated"
        elsewhere = post(client, path, body, intruder)
        assert elsewhere.status_code == 404, (path, elsewhere.text)
        assert problem_slug(elsewhere) == "not-found"
    assert snapshot() == before
    decision = post(client, f"/v1/memories/{memory['id']}/pin", {}, headers).json()
    assert client.get(f"/v1/decisions/{decision['id']}").status_code == 401


def _explained(client: TestClient, decision_id: str, headers: dict[str, str]) -> dict[str, Any]:
    response = client.get(f"/v1/decisions/{decision_id}", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_every_decision_verb_records_its_reason(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "The release train leaves on Fridays.")
    evidence = [{"observation_id": obs, "start": 0, "end": 11}]
    memory = remember(client, headers, model_id="judge-why", evidence=evidence)
    other = remember(client, headers, content="Prefers light mode")
    ids = {"m": memory["id"], "o": other["id"], "obs": obs}
    edge = post(
        client,
        f"/v1/memories/{ids['o']}/edges",
        {"kind": "supersedes", "target_id": ids["m"], "reason": "why add_edge"},
        headers,
    )
    assert edge.status_code == 201, edge.text
    decisions = {"add_edge": edge.json()["decision_id"]}
    verbs = [
        ("retract_edge", f"/v1/memories/{ids['o']}/edges/{edge.json()['id']}/retract"),
        ("forget", f"/v1/memories/{ids['m']}/forget"),
        ("restore", f"/v1/memories/{ids['m']}/restore"),
        ("pin", f"/v1/memories/{ids['m']}/pin"),
        ("unpin", f"/v1/memories/{ids['m']}/unpin"),
        ("withdraw_proposer", "/v1/proposers/model=judge-why/withdraw"),
        ("retract_observation", f"/v1/observations/{ids['obs']}/retract"),
    ]
    for kind, path in verbs:
        response = post(client, path, {"reason": f"why {kind}"}, headers)
        assert response.status_code == 201, (path, response.text)
        assert response.json()["kind"] == kind and response.json()["reason"] == f"why {kind}"
        decisions[kind] = response.json()["id"]
    erased = post(
        client, "/v1/erasures", {"memory_ids": [ids["o"]], "reason": "why erasure"}, headers
    )
    assert erased.status_code == 201, erased.text
    decisions["erasure"] = erased.json()["decision"]["id"]
    for kind, decision_id in decisions.items():
        explained = _explained(client, decision_id, headers)
        assert (explained["kind"], explained["reason"]) == (kind, f"why {kind}")
    exported = [
        json.loads(line)
        for line in client.get("/v1/tenant/export", headers=headers).text.splitlines()
    ]
    recorded = {
        line["aggregate_id"]: line["data"].get("reason")
        for line in exported
        if line["kind"] == "event" and line["type"] == "DecisionRecorded"
    }
    assert {recorded[d] for d in decisions.values()} == {f"why {k}" for k in decisions}
    # Without one, the reason is recorded as absent (it is required only by forget and
    # erasure), and a replay with another reason answers the original decision.
    pinned = post(client, f"/v1/memories/{ids['m']}/pin", {}, headers).json()
    assert pinned["reason"] is None and _explained(client, pinned["id"], headers)["reason"] is None
    again = post(client, f"/v1/memories/{ids['m']}/pin", {"reason": "other"}, headers)
    assert again.status_code == 200 and again.json()["reason"] is None


def test_withdrawing_a_principal_that_never_contributed_answers_404_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    agent = {"Authorization": f"Bearer {tenant.token('writer', 'never-contributed')}"}
    created = remember(client, agent)  # a memory, but citing nothing
    versions = client.get(f"/v1/memories/{created['id']}/versions", headers=headers).json()
    proposer = versions["versions"][0]["principal_id"]
    before = snapshot()
    for path in (
        f"/v1/proposers/{proposer}/withdraw",
        f"/v1/proposers/{uuid4()}/withdraw",
        "/v1/proposers/model=never-used/withdraw",
    ):
        response = post(client, path, {"reason": "mistyped"}, headers)
        assert response.status_code == 404, (path, response.text)
        assert problem_slug(response) == "not-found"
    assert snapshot() == before


def test_the_erasure_decision_stores_the_ids_it_names_as_lists(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    first, second = observe(client, headers, "one"), observe(client, headers, "two")
    memory = remember(client, headers)
    erased = post(
        client,
        "/v1/erasures",
        {"observation_ids": [second, first], "memory_ids": [memory["id"]], "reason": "asked"},
        headers,
    )
    assert erased.status_code == 201, erased.text
    params = _explained(client, erased.json()["decision"]["id"], headers)["params"]
    assert params["observation_ids"] == sorted([first, second])
    assert params["memory_ids"] == [memory["id"]]
