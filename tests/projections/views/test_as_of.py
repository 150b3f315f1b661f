"""As-of reads: what was believed at a log position or a time, by the same projection."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


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
    assert second["labels"]["archived"] is None  # not superseded yet
    third = belief(edge["position"])
    assert third["labels"]["superseded_by"] == [new["id"]] and third["grade"] == "supported"
    superseded = {"reason": "superseded", "superseded_by": new["id"], "edge_id": edge["id"]}
    assert third["labels"]["archived"] == superseded  # structurally, from the edge on
    fourth = belief(withdrawn["position"])
    assert fourth["grade"] == "unsupported"
    assert fourth["labels"]["archived"] == superseded
    fifth = belief(forgotten["position"])
    assert fifth["labels"]["archived"] == {
        "reason": "no longer relevant",
        "decision_id": forgotten["id"],
    }
    sixth = belief(restored["position"])
    # The restore reversed the forget only: the supersession still archives it.
    assert sixth["labels"]["archived"] == superseded and sixth["grade"] == "unsupported"
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
        {"as_of": "0.5"},  # not read as a Unix time (both bounds together read the earlier)
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


def test_as_of_every_time_reported_for_a_version_reads_that_version(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "I prefer dark mode.")
    evidence = [{"observation_id": obs, "start": 2, "end": 18}]
    created = remember(client, headers, evidence=evidence)
    post(client, f"/v1/memories/{created['id']}/versions", {"content": "v2"}, headers)
    # A batch: the version is recorded in the middle of a longer write.
    items = [
        {"op": "add_version", "memory_id": created["id"], "content": "v3", "evidence": evidence},
        {"op": "create_memory", "type": "note", "scope": "s", "content": "after"},
    ]
    assert post(client, "/v1/batch", {"items": items}, headers).status_code == 201
    versions = client.get(f"/v1/memories/{created['id']}/versions", headers=headers).json()
    assert len(versions["versions"]) == 3
    for version in versions["versions"]:
        assert _time(version["visible_at"]) >= _time(version["recorded_at"])
        for key in ("recorded_at", "visible_at"):
            answer = _at(client, created["id"], headers, as_of=version[key])
            assert answer.status_code == 200, (key, version, answer.text)
            body = answer.json()
            assert body["belief"]["current_version_id"] == version["version_id"], key
            listed = client.get("/v1/memories", headers=headers, params={"as_of": version[key]})
            assert listed.json()["position"] == body["position"]
    history = client.get(f"/v1/memories/{created['id']}/history", headers=headers).json()
    for event in history["events"]:
        answer = _at(client, created["id"], headers, as_of=event["visible_at"]).json()
        assert answer["position"] >= event["position"]  # the whole write is visible then
    for version in history["versions"]:
        answer = _at(client, created["id"], headers, as_of=version["visible_at"]).json()
        assert answer["belief"]["current_version_id"] == version["version_id"]
    feed = client.get("/v1/events", headers=headers, params={"after": 0}).json()
    assert all(_time(e["visible_at"]) >= _time(e["recorded_at"]) for e in feed["events"])
    # The batch's events are one write: one visible_at, the time of its last event.
    batched = [e for e in feed["events"] if e["visible_at"] == feed["events"][-1]["visible_at"]]
    assert len(batched) > 2 and batched[-1]["recorded_at"] == batched[-1]["visible_at"]
    export = client.get("/v1/tenant/export", headers=headers).text.splitlines()
    exported = [json.loads(line) for line in export if '"kind": "event"' in line]
    assert [(e["position"], e["visible_at"]) for e in exported] == [
        (e["position"], e["visible_at"]) for e in feed["events"]
    ]


def test_as_of_before_a_supersession_and_after_its_retraction_the_memory_is_unarchived(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    project = f"p-{tenant.id.hex[:8]}"
    old = remember(client, headers, project=project)
    new = remember(client, headers, project=project, content="Prefers light mode")
    edge = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    ).json()
    retracted = post(
        client, f"/v1/memories/{new['id']}/edges/{edge['id']}/retract", {}, headers
    ).json()

    def archived(position: int) -> Any:
        answer = _at(client, old["id"], headers, at_position=position).json()
        return answer["belief"]["labels"]["archived"]

    def listed(position: int, **params: Any) -> list[str]:
        page = client.get(
            "/v1/memories",
            headers=headers,
            params={"project": project, "at_position": position, **params},
        ).json()
        return [i["id"] for i in page["items"]]

    assert archived(new["position"]) is None
    assert listed(new["position"]) == [new["id"], old["id"]]
    assert archived(edge["position"])["superseded_by"] == new["id"]
    assert listed(edge["position"]) == [new["id"]]  # hidden, as a forgotten memory is
    assert listed(edge["position"], include_archived="true") == [new["id"], old["id"]]
    assert archived(retracted["position"]) is None
    assert listed(retracted["position"]) == [new["id"], old["id"]]
