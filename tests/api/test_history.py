"""History reads, the event feed (paged and SSE), and as-of listings."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def test_history_shows_versions_contributions_edges_and_every_event(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "I prefer dark mode at night.")
    memory = remember(
        client,
        headers,
        content="Prefers dark mode",
        model_id="judge-1.4",
        evidence=[{"observation_id": obs, "start": 2, "end": 20}],
    )
    revised = post(
        client, f"/v1/memories/{memory['id']}/versions", {"content": "Prefers dim mode"}, headers
    ).json()
    newer = remember(client, headers, content="Prefers light mode")
    edge = post(
        client,
        f"/v1/memories/{newer['id']}/edges",
        {"kind": "supersedes", "target_id": memory["id"]},
        headers,
    ).json()
    retract = post(client, f"/v1/observations/{obs}/retract", {}, headers).json()

    response = client.get(f"/v1/memories/{memory['id']}/history", headers=headers)
    assert response.status_code == 200, response.text
    history = response.json()
    first, second = history["versions"]
    assert first["content"] == "Prefers dark mode"
    assert first["formed_from"][0]["observation_id"] == obs
    # Positions are each event's own; the write's response gives its last event's.
    assert first["position"] == history["events"][1]["position"] <= memory["position"]
    [contribution] = first["contributions"]
    assert contribution["model_id"] == "judge-1.4"
    assert contribution["active"] is False
    assert contribution["deactivated_by"] == retract["id"]
    assert second["content"] == "Prefers dim mode" and second["contributions"] == []
    assert second["version_id"] == revised["version_id"]
    [incoming] = history["edges"]
    assert incoming["source_id"] == newer["id"] and incoming["target_id"] == memory["id"]
    assert incoming["decision_id"] == edge["decision_id"]
    types = [e["type"] for e in history["events"]]
    assert types == [
        "MemoryCreated",
        "VersionRecorded",
        "ContributionAdded",
        "VersionRecorded",
        "EdgeAdded",
        "ContributionDeactivated",
    ]
    positions = [e["position"] for e in history["events"]]
    assert positions == sorted(positions)
    assert all(e["principal_id"] and e["recorded_at"] for e in history["events"])
    assert "Prefers" not in json.dumps(history["events"])  # events never carry content


def test_the_event_feed_pages_through_the_tenants_events_only(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    headers = tenant.headers()
    start = client.get("/v1/events", headers=headers, params={"limit": 1000}).json()["next_after"]
    obs = observe(client, headers, "secret words")
    remember(client, headers, evidence=[{"observation_id": obs, "start": 0, "end": 6}])
    remember(client, other_tenant.headers(), content="not yours")
    first = client.get("/v1/events", headers=headers, params={"after": start, "limit": 2}).json()
    rest = client.get(
        "/v1/events", headers=headers, params={"after": first["next_after"], "limit": 100}
    ).json()
    events = first["events"] + rest["events"]
    assert [e["type"] for e in events] == [
        "ObservationCaptured",
        "MemoryCreated",
        "VersionRecorded",
        "ContributionAdded",
    ]
    assert events[0]["data"]["digest"].startswith("sha256:")
    text = json.dumps(events)
    assert "secret" not in text and "Prefers" not in text and "not yours" not in text
    assert rest["next_after"] == events[-1]["position"]
    empty = client.get("/v1/events", headers=headers, params={"after": rest["next_after"]}).json()
    assert empty == {"events": [], "next_after": rest["next_after"]}
    assert client.get("/v1/events", headers=headers, params={"limit": 0}).status_code == 422
    assert client.get("/v1/events").status_code == 401


def test_the_event_stream_sends_the_feed_as_server_sent_events(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    start = client.get("/v1/events", headers=headers, params={"limit": 1000}).json()["next_after"]
    memory = remember(client, headers)
    with client.stream(
        "GET", "/v1/events/stream", headers=headers, params={"after": start, "limit": 2}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        body = "".join(response.iter_text())
    messages = [m for m in body.split("\n\n") if m.startswith("id:")]
    assert len(messages) == 2
    fields = dict(line.split(": ", 1) for line in messages[0].splitlines())
    assert fields["event"] == "MemoryCreated"
    data = json.loads(fields["data"])
    assert data["aggregate_id"] == memory["id"] and int(fields["id"]) == data["position"]
    # Last-Event-ID resumes after the last event received.
    with client.stream(
        "GET",
        "/v1/events/stream",
        headers={**headers, "Last-Event-ID": fields["id"]},
        params={"limit": 1},
    ) as resumed:
        again = "".join(resumed.iter_text())
    assert "event: VersionRecorded" in again


def test_as_of_listing_shows_what_was_believed_then(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    project = "as-of-listing"
    first = remember(client, headers, project=project, content="one")
    second = remember(client, headers, project=project, content="two")
    forgotten = post(
        client, f"/v1/memories/{first['id']}/forget", {"reason": "obsolete"}, headers
    ).json()
    remember(client, headers, project=project, content="three")

    def listing(**params: Any) -> dict[str, Any]:
        response = client.get(
            "/v1/memories", headers=headers, params={"project": project, **params}
        )
        assert response.status_code == 200, response.text
        return dict(response.json())

    at_second = listing(at_position=second["position"])
    assert at_second["position"] == second["position"]
    assert [i["id"] for i in at_second["items"]] == [second["id"], first["id"]]
    assert all(i["status"] == "as_of" for i in at_second["items"])
    assert at_second["items"][1]["belief"]["labels"]["archived"] is None
    at_forget = listing(at_position=forgotten["position"])
    assert [i["id"] for i in at_forget["items"]] == [second["id"]]  # forgotten by then
    flagged = listing(at_position=forgotten["position"], include_archived="true")
    archived = flagged["items"][1]["belief"]["labels"]["archived"]
    assert archived == {"reason": "obsolete", "decision_id": forgotten["id"]}
    paged = listing(at_position=forgotten["position"], limit=1, include_archived="true")
    assert [i["id"] for i in paged["items"]] == [second["id"]]
    following = listing(
        at_position=forgotten["position"],
        limit=1,
        cursor=paged["next_cursor"],
        include_archived="true",
    )
    assert [i["id"] for i in following["items"]] == [first["id"]]
    assert following["next_cursor"] is None  # null on the last page
    # An as-of listing is never pending: status=current keeps all, pending none.
    settled = client.get(
        "/v1/memories", headers=headers, params={"at_position": 1, "status": "pending"}
    )
    assert settled.status_code == 200 and settled.json()["items"] == []


def test_current_listings_leave_forgotten_memories_out_unless_asked(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    project = "forgotten-listing"
    kept = remember(client, headers, project=project, content="kept")
    gone = remember(client, headers, project=project, content="gone")
    post(client, f"/v1/memories/{gone['id']}/forget", {"reason": "duplicate"}, headers)
    drain_until_caught_up(runtime)
    listed = client.get("/v1/memories", headers=headers, params={"project": project}).json()
    assert [i["id"] for i in listed["items"]] == [kept["id"]]
    everything = client.get(
        "/v1/memories", headers=headers, params={"project": project, "include_archived": "true"}
    ).json()
    assert [i["id"] for i in everything["items"]] == [gone["id"], kept["id"]]
    assert everything["items"][0]["belief"]["labels"]["archived"]["reason"] == "duplicate"
    # Read by id, a forgotten memory answers, flagged; its history keeps its text.
    direct = client.get(f"/v1/memories/{gone['id']}", headers=headers).json()
    assert direct["belief"]["labels"]["archived"]["reason"] == "duplicate"
    history = client.get(f"/v1/memories/{gone['id']}/history", headers=headers).json()
    assert history["versions"][0]["content"] == "gone"


def test_history_and_feed_refuse_bad_requests_clearly(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    for path, params, status in (
        ("/v1/memories/00000000-0000-0000-0000-000000000000/history", {}, 404),
        ("/v1/memories/not-a-uuid/history", {}, 422),
        ("/v1/events", {"after": -1}, 422),
        ("/v1/events", {"limit": 1001}, 422),
        ("/v1/events/stream", {"limit": 0}, 422),
        ("/v1/decisions/not-a-uuid", {}, 422),
        ("/v1/decisions/00000000-0000-0000-0000-000000000000", {}, 404),
    ):
        response = client.get(path, headers=headers, params=params)
        assert response.status_code == status, (path, params, response.text)
        problem_slug(response)
    elsewhere = client.get(f"/v1/memories/{memory['id']}/history", headers=other_tenant.headers())
    assert elsewhere.status_code == 404
