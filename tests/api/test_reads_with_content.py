"""Current reads carry the text: by id, listed, by ids; observations are listed;
listings and recall filter by topic; unknown query parameters are refused."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _get(client: TestClient, path: str, headers: dict[str, str], **params: Any) -> Any:
    response = client.get(path, headers=headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_current_read_carries_the_current_text_and_attributes_pending_never(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = remember(
        client,
        headers,
        type="fact",
        scope="team",
        project="apollo",
        topic="deploys",
        content="Deploys happen on Fridays",
    )
    path = f"/v1/memories/{created['id']}"
    pending = _get(client, path, headers)
    assert pending["status"] == "pending" and "content" not in pending
    drain_until_caught_up(runtime)
    current = _get(client, path, headers)
    assert current["status"] == "current"
    assert current["content"] == "Deploys happen on Fridays"
    assert (current["type"], current["scope"], current["project"], current["topic"]) == (
        "fact",
        "team",
        "apollo",
        "deploys",
    )
    post(client, f"{path}/versions", {"content": "Deploys happen on Tuesdays"}, headers)
    assert "content" not in _get(client, path, headers)  # pending again: no stale text
    drain_until_caught_up(runtime)
    assert _get(client, path, headers)["content"] == "Deploys happen on Tuesdays"


def test_listings_carry_text_unless_asked_not_to_and_filter_by_topic(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    ui = remember(client, headers, type="note", scope="s", topic="ui", content="Dark mode")
    billing = remember(client, headers, type="note", scope="s", topic="billing", content="Bills")
    waiting = remember(client, headers, type="note", scope="s", topic="ui", content="Later")
    drain_until_caught_up(runtime)
    post(client, f"/v1/memories/{waiting['id']}/versions", {"content": "Later still"}, headers)
    listed = {i["id"]: i for i in _get(client, "/v1/memories", headers)["items"]}
    assert listed[ui["id"]]["content"] == "Dark mode" and listed[ui["id"]]["topic"] == "ui"
    assert listed[waiting["id"]]["status"] == "pending"
    assert "content" not in listed[waiting["id"]] and "belief" not in listed[waiting["id"]]
    bare = _get(client, "/v1/memories", headers, include_content="false")["items"]
    assert all(i.get("content") is None for i in bare)  # null: the schema names the field
    assert {i["id"]: i["belief"] for i in bare if i["status"] == "current"}[ui["id"]]
    topical = _get(client, "/v1/memories", headers, topic="ui")["items"]
    assert {i["id"] for i in topical} == {ui["id"], waiting["id"]}
    then = _get(client, "/v1/memories", headers, topic="billing", at_position=billing["position"])
    assert [i["topic"] for i in then["items"]] == ["billing"]


def test_memories_are_read_by_ids_in_the_order_given(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    first = remember(client, headers, content="first")
    second = remember(client, headers, content="second")
    forgotten = remember(client, headers, content="forgotten")
    theirs = remember(client, other_tenant.headers(), content="theirs")
    post(client, f"/v1/memories/{forgotten['id']}/forget", {"reason": "old"}, headers)
    drain_until_caught_up(runtime)
    missing = str(uuid.uuid4())
    ids = [second["id"], missing, first["id"], forgotten["id"], theirs["id"], second["id"]]
    page = _get(client, "/v1/memories/batch", headers, ids=ids)
    assert [i["id"] for i in page["items"]] == [second["id"], first["id"], forgotten["id"]]
    assert [i["content"] for i in page["items"]] == ["second", "first", "forgotten"]
    assert page["items"][2]["belief"]["labels"]["archived"]["reason"] == "old"  # flagged
    assert page["not_found"] == [missing, theirs["id"]]
    assert "next_cursor" not in page  # not a listing: nothing to page through
    for params, status in (
        ({"ids": [str(uuid.uuid4()) for _ in range(101)]}, 422),
        ({"ids": ["not-a-uuid"]}, 422),
        ({}, 422),
        # Its own operation: the listing's filters are not among its parameters.
        ({"ids": [first["id"]], "type": "fact"}, 400),
        ({"ids": [first["id"]], "cursor": "abc"}, 400),
    ):
        response = client.get("/v1/memories/batch", headers=headers, params=params)
        assert response.status_code == status, params
        assert problem_slug(response) in {
            "validation-error",
            "invalid-input",
            "unknown-query-parameter",
        }
    # The listing no longer takes ids: a client still sending them is told so.
    response = client.get("/v1/memories", headers=headers, params={"ids": first["id"]})
    assert problem_slug(response) == "unknown-query-parameter"


def test_a_batch_answers_pending_and_bare_memories_in_the_order_given(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    settled = remember(client, headers, content="settled")
    revised = remember(client, headers, content="before")
    drain_until_caught_up(runtime)
    post(client, f"/v1/memories/{revised['id']}/versions", {"content": "after"}, headers)
    fresh = remember(client, headers, content="not drained yet")
    missing = str(uuid.uuid4())
    ids = [fresh["id"], settled["id"], missing, revised["id"]]
    for _ in range(2):  # the first request authenticates; the next one is a plain request
        page = _get(client, "/v1/memories/batch", headers, ids=ids)
        assert [(i["id"], i["status"]) for i in page["items"]] == [
            (fresh["id"], "pending"),
            (settled["id"], "current"),
            (revised["id"], "pending"),  # never the text of the version before
        ]
        assert [i.get("content") for i in page["items"]] == [None, "settled", None]
        assert page["not_found"] == [missing]
    bare = _get(client, "/v1/memories/batch", headers, ids=ids, include_content="false")
    assert bare["items"][1]["content"] is None and bare["items"][1]["belief"]
    drain_until_caught_up(runtime)
    page = _get(client, "/v1/memories/batch", headers, ids=ids)
    assert [i.get("content") for i in page["items"]] == ["not drained yet", "settled", "after"]
    response = client.get(
        "/v1/memories/batch", headers=headers, params={"ids": ids, "include_content": "maybe"}
    )
    assert response.status_code == 422 and problem_slug(response) == "validation-error"


def test_observations_are_listed_page_by_page_newest_first(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    headers = tenant.headers()
    made = [observe(client, headers, f"report {i}") for i in range(7)]
    batch = [{"op": "create_observation", "content": f"batched {i}"} for i in range(3)]
    results = post(client, "/v1/batch", {"items": batch}, headers).json()["results"]
    made += [r["id"] for r in results]
    observe(client, other_tenant.headers(), "not theirs")
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = _get(
            client, "/v1/observations", headers, limit=3, **({"cursor": cursor} if cursor else {})
        )
        assert len(page["items"]) <= 3
        seen += page["items"]
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    assert [i["id"] for i in seen] == list(reversed(made))
    assert [i["position"] for i in seen] == sorted((i["position"] for i in seen), reverse=True)
    assert all("content" not in i and i["media_type"] == "text/plain" for i in seen)
    one = _get(client, f"/v1/observations/{made[0]}", headers)
    assert {k: v for k, v in one.items() if k != "milestones"} == seen[-1]
    bad = client.get("/v1/observations", headers=headers, params={"cursor": "nope"})
    assert bad.status_code == 422 and problem_slug(bad) == "invalid-input"


def test_unknown_query_parameters_are_refused_and_nothing_is_written(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    before = snapshot()
    for method, path, params in (
        ("GET", "/v1/memories", {"projet": "apollo"}),
        ("GET", "/v1/memories", {"scope": "s", "typ": "fact"}),
        ("GET", f"/v1/memories/{created['id']}", {"wiat": "5"}),
        ("GET", "/v1/observations", {"page": "2"}),
        ("GET", "/v1/events", {"since": "0"}),
        ("POST", "/v1/memories", {"dry_run": "true"}),
        ("POST", "/v1/recall", {"k": "3"}),
    ):
        body = (
            {"type": "fact", "scope": "s", "content": "x"}
            if path == "/v1/memories"
            else {"query": "x"}
        )
        response = client.request(method, path, headers=headers, params=params, json=body)
        assert response.status_code == 400, (method, path, response.text)
        assert problem_slug(response) == "unknown-query-parameter"
        assert next(iter(params)) in response.json()["detail"]
    assert snapshot() == before
    assert client.get("/v1/memories", headers=headers, params={"scope": "user"}).status_code == 200
