"""A revision of a memory that is archived never succeeds silently (issue 44, item 6):
409 naming why it is archived (forgotten, or superseded) and how to restore it, or
``restore: true``, which restores and revises in one write."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _revise(
    client: TestClient, headers: dict[str, str], memory_id: str, content: str, **extra: Any
) -> Any:
    return post(
        client, f"/v1/memories/{memory_id}/versions", {"content": content, **extra}, headers
    )


def _current(client: TestClient, headers: dict[str, str], memory_id: str) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}", headers=headers, params={"wait": 5}).json()
    assert answer["status"] == "current", answer
    return dict(answer)


def _versions(client: TestClient, headers: dict[str, str], memory_id: str) -> list[str]:
    found = client.get(f"/v1/memories/{memory_id}/versions", headers=headers).json()
    return [v["content"] for v in found["versions"]]


def test_revising_a_forgotten_memory_is_refused_until_asked_to_restore(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    # Given a forgotten memory.
    headers = tenant.headers("writer")
    made = remember(client, headers, content="Standup is at 10:00")
    forgot = post(client, f"/v1/memories/{made['id']}/forget", {"reason": "cancelled"}, headers)
    assert forgot.status_code == 201, forgot.text

    # When it is revised as it is, nothing is written and the problem says why.
    before = snapshot()
    refused = _revise(client, headers, made["id"], "Standup is at 09:30")
    assert refused.status_code == 409 and problem_slug(refused) == "memory-forgotten"
    assert snapshot()["log_head"] == before["log_head"]
    assert _versions(client, headers, made["id"]) == ["Standup is at 10:00"]

    # With restore: true, it is restored and revised in one write.
    restored = _revise(client, headers, made["id"], "Standup is at 09:30", restore=True)
    assert restored.status_code == 201, restored.text
    drain_until_caught_up(runtime)
    now = _current(client, headers, made["id"])
    assert now["content"] == "Standup is at 09:30"
    assert now["belief"]["labels"].get("archived") is None
    history = client.get(f"/v1/memories/{made['id']}/history", headers=headers).json()
    types = [e["type"] for e in history["events"]]
    assert types[-2:] == ["MemoryRestored", "VersionRecorded"]  # one write, restore first

    # restore: true on a memory that is not archived just revises it.
    again = _revise(client, headers, made["id"], "Standup is at 09:45", restore=True)
    assert again.status_code == 201, again.text


def test_revising_a_superseded_memory_is_refused_until_asked_to_restore(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    # Given a memory superseded by a newer one.
    headers = tenant.headers("writer")
    old = remember(client, headers, content="Prefers dark mode")
    new = remember(client, headers, content="Prefers light mode")
    edge = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    assert edge.status_code == 201, edge.text

    before = snapshot()
    refused = _revise(client, headers, old["id"], "Prefers dark mode at night")
    assert refused.status_code == 409 and problem_slug(refused) == "memory-superseded"
    assert snapshot()["log_head"] == before["log_head"]
    # The batch's add_version is the same write, refused the same way.
    batch = post(
        client,
        "/v1/batch",
        {"items": [{"op": "add_version", "memory_id": old["id"], "content": "x"}]},
        headers,
    )
    assert batch.status_code == 409 and problem_slug(batch) == "memory-superseded"

    restored = _revise(client, headers, old["id"], "Prefers dark mode at night", restore=True)
    assert restored.status_code == 201, restored.text
    drain_until_caught_up(runtime)
    now = _current(client, headers, old["id"])
    assert now["content"] == "Prefers dark mode at night"
    assert now["belief"]["labels"].get("archived") is None
    assert now["belief"]["labels"].get("superseded_by") in (None, [])
    # The edge was retracted by a recorded decision, in the same write.
    history = client.get(f"/v1/memories/{old['id']}/history", headers=headers).json()
    assert [e["type"] for e in history["events"]][-2:] == ["EdgeRetracted", "VersionRecorded"]
