"""Adding support to a version without writing its text again (issue 12, item 4)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _belief(client: TestClient, memory_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}", headers=headers).json()
    assert answer["status"] == "current", answer
    return dict(answer["belief"])


def _writer(tenant: Tenant, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {tenant.token('writer', name)}"}


def test_support_added_by_another_proposer_stands_when_the_first_is_withdrawn(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    author, helper = _writer(tenant, "author"), _writer(tenant, "helper")
    first = observe(client, headers, "The build runs on Python 3.12 now.")
    second = observe(client, headers, "CI was moved to Python 3.12 last week.")
    memory = remember(
        client,
        author,
        type="fact",
        content="Python 3.12",
        evidence=[{"observation_id": first, "start": 22, "end": 33}],
    )
    drain_until_caught_up(runtime)
    assert _belief(client, memory["id"], headers)["grade"] == "supported"

    added = post(
        client,
        f"/v1/memories/{memory['id']}/contributions",
        {"evidence": [{"observation_id": second, "start": 19, "end": 30}], "model_id": "j-3"},
        helper,
    )
    assert added.status_code == 201, added.text
    body = added.json()
    assert (body["memory_id"], body["version_id"]) == (memory["id"], memory["version_id"])
    [contribution] = body["contributions"]
    assert (contribution["observation_id"], contribution["start"]) == (second, 19)
    assert contribution["excerpt_digest"].startswith("sha256:")
    drain_until_caught_up(runtime)
    belief = _belief(client, memory["id"], headers)
    assert belief["grade"] == "corroborated" and contribution["id"] in belief["support"]
    versions = client.get(f"/v1/memories/{memory['id']}/versions", headers=headers).json()
    assert len(versions["versions"]) == 1  # no text written again

    author_id = versions["versions"][0]["principal_id"]
    withdrawn = post(client, f"/v1/proposers/{author_id}/withdraw", {"reason": "x"}, headers)
    assert withdrawn.status_code == 201, withdrawn.text
    drain_until_caught_up(runtime)
    belief = _belief(client, memory["id"], headers)
    assert belief["grade"] == "supported" and belief["support"] == [contribution["id"]]


def test_support_for_a_named_version_and_the_checks_of_evidence(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers()
    helper = _writer(tenant, "helper")
    obs = observe(client, headers, "Standup is at 9:30 every weekday.")
    retracted = observe(client, headers, "Standup is at 10.")
    post(client, f"/v1/observations/{retracted}/retract", {"reason": "wrong"}, headers)
    memory = remember(client, headers, type="fact", content="Standup at 9:30")
    newer = post(
        client, f"/v1/memories/{memory['id']}/versions", {"content": "Standup 9:30"}, headers
    ).json()
    evidence = [{"observation_id": obs, "start": 0, "end": 19}]
    path = f"/v1/memories/{memory['id']}/contributions"
    older = post(client, path, {"version_id": memory["version_id"], "evidence": evidence}, helper)
    assert older.status_code == 201 and older.json()["version_id"] == memory["version_id"]
    drain_until_caught_up(runtime)
    belief = _belief(client, memory["id"], headers)
    assert belief["current_version_id"] == newer["version_id"]
    assert belief["grade"] == "unsupported"  # support for an older version does not count

    reader = tenant.headers("reader")
    before = snapshot()
    for body, who, status, slug in (
        ({"evidence": [{"observation_id": obs, "start": 0, "end": 99}]}, helper, 422, None),
        ({"evidence": [{"observation_id": retracted, "start": 0, "end": 5}]}, helper, 422, None),
        ({"evidence": []}, helper, 422, "validation-error"),
        ({"evidence": evidence, "trust": 2}, helper, 422, "validation-error"),
        ({"evidence": evidence, "version_id": obs}, helper, 404, "not-found"),
        ({"evidence": evidence}, reader, 403, "forbidden"),
    ):
        response = post(client, path, body, who)
        assert response.status_code == status, (body, response.text)
        assert slug is None or problem_slug(response) == slug
    unknown = post(client, f"/v1/memories/{obs}/contributions", {"evidence": evidence}, helper)
    assert unknown.status_code == 404 and problem_slug(unknown) == "not-found"
    assert snapshot() == before

    # The same proposer citing the same source for the same version again adds nothing.
    current = post(client, path, {"evidence": evidence}, helper)
    assert current.status_code == 201, current.text
    before = snapshot()
    twice = post(client, path, {"evidence": evidence}, helper)
    assert twice.status_code == 409 and problem_slug(twice) == "conflict"
    assert snapshot() == before
    drain_until_caught_up(runtime)
    assert _belief(client, memory["id"], headers)["grade"] == "supported"
