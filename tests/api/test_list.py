"""Listing memories: filters, pages that neither repeat nor skip, pending never with content."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug
from tests.conftest import Tenant, drain_until_caught_up


def _all_pages(client: TestClient, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/memories", headers=headers, params=query).json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if cursor is None:
            return items


def test_pages_cover_every_memory_once_even_across_a_batch(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    items = [
        {"op": "create_memory", "type": "note", "scope": "s", "content": f"n{i}"} for i in range(23)
    ]
    ids = {r["id"] for r in post(client, "/v1/batch", {"items": items}, headers).json()["results"]}
    listed = [i["id"] for i in _all_pages(client, headers, limit=5)]
    assert len(listed) == len(set(listed)) == 23
    assert set(listed) == ids


def test_filters_and_status_are_applied_and_pending_has_no_belief(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    make = [
        {
            "op": "create_memory",
            "type": "preference",
            "scope": "user",
            "project": "a",
            "content": "p",
        },
        {"op": "create_memory", "type": "fact", "scope": "user", "project": "a", "content": "f"},
        {"op": "create_memory", "type": "fact", "scope": "team", "content": "g"},
    ]
    ids = [r["id"] for r in post(client, "/v1/batch", {"items": make}, headers).json()["results"]]
    assert {i["status"] for i in _all_pages(client, headers)} == {"pending"}
    assert all("belief" not in i for i in _all_pages(client, headers))
    drain_until_caught_up(runtime)
    post(client, f"/v1/memories/{ids[1]}/versions", {"content": "f2"}, headers)
    # One batch is one log position: its memories are ordered by id, not by item.
    assert {i["id"] for i in _all_pages(client, headers, type="fact")} == {ids[1], ids[2]}
    user_a = _all_pages(client, headers, scope="user", project="a")
    assert {i["id"] for i in user_a} == {ids[0], ids[1]}
    current = _all_pages(client, headers, status="current")
    assert {i["id"] for i in current} == {ids[0], ids[2]}
    assert all(i["belief"]["current_version_id"] for i in current)
    assert [i["id"] for i in _all_pages(client, headers, status="pending")] == [ids[1]]


def test_bad_cursors_and_limits_are_refused(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    for params in (
        {"cursor": "not-a-cursor"},
        {"limit": 0},
        {"limit": 201},
        {"status": "stale"},
        {"type": "opinion"},
    ):
        response = client.get("/v1/memories", headers=headers, params=params)
        assert response.status_code == 422, params
        assert problem_slug(response) in {"invalid-input", "validation-error"}


def test_a_listing_shows_only_the_callers_tenant(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    post(
        client, "/v1/memories", {"type": "fact", "scope": "s", "content": "mine"}, tenant.headers()
    )
    assert _all_pages(client, other_tenant.headers()) == []


def test_newer_writes_are_listed_first(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    first = post(client, "/v1/memories", {"type": "fact", "scope": "s", "content": "1"}, headers)
    second = post(client, "/v1/memories", {"type": "fact", "scope": "s", "content": "2"}, headers)
    listed = [i["id"] for i in _all_pages(client, headers)]
    assert listed == [second.json()["id"], first.json()["id"]]
