"""As-of reads: what was believed at a log position or a time, by the same projection."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from projections.runtime import Runtime
from projections.store.schema import EVENTS_TABLE
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant


def _at(client: TestClient, memory_id: str, headers: dict[str, str], **params: Any) -> Any:
    return client.get(f"/v1/memories/{memory_id}", headers=headers, params=params)


def test_as_of_before_and_after_a_revision_an_edge_a_withdrawal_and_a_restore(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "I prefer dark mode.")
    old = remember(client, headers, evidence=[{"observation_id": obs, "start": 2, "end": 18}])
    revised = post(
        client,
        f"/v1/memories/{old['id']}/versions",
        {
            "content": "Prefers dim mode",
            "evidence": [{"observation_id": obs, "start": 2, "end": 8}],
        },
        headers,
    ).json()
    new = remember(client, headers, content="Prefers light mode")
    edge = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    ).json()
    withdrawn = post(
        client, f"/v1/observations/{obs}/retract", {"reason": "misheard"}, headers
    ).json()
    forgotten = post(
        client, f"/v1/memories/{old['id']}/forget", {"reason": "no longer relevant"}, headers
    ).json()
    restored = post(client, f"/v1/memories/{old['id']}/restore", {}, headers).json()

    def belief(position: int) -> dict[str, Any]:
        answer = _at(client, old["id"], headers, at_position=position).json()
        assert answer["status"] == "as_of" and answer["position"] == position
        return dict(answer["belief"])

    first = belief(old["position"])
    assert first["current_version_id"] == old["version_id"] and first["grade"] == "supported"
    second = belief(revised["position"])
    assert second["current_version_id"] == revised["version_id"]
    assert second["labels"]["superseded_by"] == []
    third = belief(edge["position"])
    assert third["labels"]["superseded_by"] == [new["id"]] and third["grade"] == "supported"
    fourth = belief(withdrawn["position"])
    assert fourth["grade"] == "unsupported"
    assert fourth["labels"]["archived"] is None
    fifth = belief(forgotten["position"])
    assert fifth["labels"]["archived"] == {
        "reason": "no longer relevant",
        "decision_id": forgotten["id"],
    }
    sixth = belief(restored["position"])
    assert sixth["labels"]["archived"] is None and sixth["grade"] == "unsupported"
    # Earlier positions still answer as they did: the forget bounds the fact going forward.
    assert belief(edge["position"]) == third


def test_as_of_a_time_says_which_position_it_used(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT recorded_at FROM "{schema}"."{EVENTS_TABLE}" WHERE notification_id = %s',
            (created["position"],),
        ).fetchone()
    assert row is not None
    post(client, f"/v1/memories/{created['id']}/versions", {"content": "later"}, headers)
    answer = _at(client, created["id"], headers, as_of=row[0].isoformat()).json()
    assert answer["status"] == "as_of"
    assert answer["position"] == created["position"]
    assert answer["belief"]["current_version_id"] == created["version_id"]
    again = _at(client, created["id"], headers, as_of=row[0].isoformat()).json()
    assert again == answer  # repeatable


def test_as_of_is_never_pending_and_refuses_what_did_not_exist_yet(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    assert _at(client, created["id"], headers).json()["status"] == "pending"
    assert (
        _at(client, created["id"], headers, at_position=created["position"]).json()["status"]
        == "as_of"
    )
    before = _at(client, created["id"], headers, at_position=created["position"] - 1)
    assert before.status_code == 404
    assert problem_slug(before) == "not-found"
    long_ago = _at(client, created["id"], headers, as_of="2000-01-01T00:00:00Z")
    assert long_ago.status_code == 404


def test_bad_as_of_parameters_are_refused(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    for params in (
        {"at_position": -1},
        {"at_position": "x"},
        {"as_of": "yesterday"},
        {"as_of": "2026-01-01T00:00:00"},
        {"at_position": 1, "as_of": "2026-01-01T00:00:00Z"},
    ):
        response = _at(client, created["id"], headers, **params)
        assert response.status_code == 422, params
        assert problem_slug(response) in {"validation-error", "invalid-input"}


def test_a_position_inside_a_write_reads_as_the_moment_before_it(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    revised = post(
        client, f"/v1/memories/{created['id']}/versions", {"content": "again"}, headers
    ).json()
    items = [
        {"op": "add_version", "memory_id": created["id"], "content": f"v{i}"} for i in range(3)
    ]
    batch = post(client, "/v1/batch", {"items": items}, headers).json()["results"]
    inside = batch[-1]["position"] - 1  # the batch's events are consecutive, in one write
    answer = _at(client, created["id"], headers, at_position=inside).json()
    assert answer["position"] == revised["position"]
    assert answer["belief"]["current_version_id"] == revised["version_id"]
