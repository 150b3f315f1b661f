"""Forgetting operations do not imply each other (the ones built so far).

Each test applies one operation alone to the same starting point (a memory
supported by one observation, current) and checks that the effects of the
others are absent. Demotion has no durable effect to check (its formula is
tested in tests/domain/test_salience.py, and reads that rank in
tests/api/test_salience_reads.py). Erasure removes content by design; what it
must not do is reach what was not named or formed only from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, remember
from tests.conftest import Tenant, drain_until_caught_up

LATER = datetime.now(UTC) + timedelta(days=31)


@dataclass
class Start:
    """A memory supported by one observation, drained and current."""

    headers: dict[str, str]
    observation: str
    memory: dict[str, Any]
    belief: dict[str, Any]


@pytest.fixture
def start(client: TestClient, tenant: Tenant, runtime: Runtime) -> Start:
    headers = tenant.headers()
    obs = observe(client, headers, "The release ships on Friday.")
    memory = remember(
        client,
        headers,
        type="fact",
        content="Release on Friday",
        evidence=[{"observation_id": obs, "start": 4, "end": 27}],
    )
    drain_until_caught_up(runtime)
    answer = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert answer["status"] == "current" and answer["belief"]["grade"] == "supported"
    return Start(headers, obs, memory, answer["belief"])


@pytest.fixture
def later(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: LATER)) as client:
        yield client


def _listed(client: TestClient, start: Start) -> list[str]:
    """Return the ids an ordinary listing shows (the tenant is fresh: only ours)."""
    items = client.get("/v1/memories", headers=start.headers).json()["items"]
    return [i["id"] for i in items]


def _history_text(client: TestClient, start: Start) -> str | None:
    history = client.get(f"/v1/memories/{start.memory['id']}/history", headers=start.headers)
    return history.json()["versions"][0]["content"]  # type: ignore[no-any-return]


def test_forget_archives_only(client: TestClient, start: Start, runtime: Runtime) -> None:
    post(client, f"/v1/memories/{start.memory['id']}/forget", {"reason": "done"}, start.headers)
    drain_until_caught_up(runtime)
    belief = client.get(f"/v1/memories/{start.memory['id']}", headers=start.headers).json()[
        "belief"
    ]
    assert belief["labels"]["archived"]["reason"] == "done"
    # not withdrawal: support and grade unchanged
    assert belief["grade"] == start.belief["grade"] and belief["support"] == start.belief["support"]
    # not erasure or expiry: the text and the raw bytes stay
    assert _history_text(client, start) == "Release on Friday"
    content = client.get(f"/v1/observations/{start.observation}/content", headers=start.headers)
    assert content.status_code == 200


def test_withdrawal_changes_support_only(
    client: TestClient, start: Start, runtime: Runtime
) -> None:
    post(client, f"/v1/observations/{start.observation}/retract", {}, start.headers)
    drain_until_caught_up(runtime)
    belief = client.get(f"/v1/memories/{start.memory['id']}", headers=start.headers).json()[
        "belief"
    ]
    assert belief["grade"] == "unsupported" and belief["support"] == []
    # not archival: still listed, not flagged
    assert belief["labels"]["archived"] is None
    assert start.memory["id"] in _listed(client, start)
    # not erasure or expiry: text and raw bytes stay readable
    assert _history_text(client, start) == "Release on Friday"
    content = client.get(f"/v1/observations/{start.observation}/content", headers=start.headers)
    assert content.status_code == 200 and content.text == "The release ships on Friday."


def test_raw_expiry_deletes_bytes_only(
    client: TestClient, later: TestClient, start: Start, runtime: Runtime
) -> None:
    while expire_due(runtime.log, now=LATER):
        pass
    drain_until_caught_up(runtime)
    assert (
        later.get(
            f"/v1/observations/{start.observation}/content", headers=start.headers
        ).status_code
        == 410
    )
    answer = later.get(f"/v1/memories/{start.memory['id']}", headers=start.headers).json()
    # not withdrawal: the memory stays current with the same support and grade
    assert answer["status"] == "current"
    assert answer["belief"]["grade"] == start.belief["grade"]
    assert answer["belief"]["support"] == start.belief["support"]
    # not archival: not flagged, still listed
    assert answer["belief"]["labels"]["archived"] is None
    assert start.memory["id"] in _listed(later, start)
    # not erasure: the memory's text and its retained excerpt stay
    history = later.get(f"/v1/memories/{start.memory['id']}/history", headers=start.headers)
    version = history.json()["versions"][0]
    assert version["content"] == "Release on Friday"
    assert version["formed_from"][0]["excerpt_digest"].startswith("sha256:")


def test_cache_eviction_changes_nothing_durable(
    client: TestClient, start: Start, snapshot: Any
) -> None:
    before = snapshot()
    assert post(client, "/v1/admin/cache/evict", {}, start.headers).status_code == 200
    assert snapshot() == before
    answer = client.get(f"/v1/memories/{start.memory['id']}", headers=start.headers).json()
    assert answer["belief"] == start.belief


def test_erasing_a_memory_erases_only_that_memory(
    client: TestClient, start: Start, runtime: Runtime
) -> None:
    sibling = remember(
        client,
        start.headers,
        type="fact",
        content="Ships Friday",
        evidence=[{"observation_id": start.observation, "start": 4, "end": 27}],
    )
    erased = post(
        client,
        "/v1/erasures",
        {"memory_ids": [start.memory["id"]], "reason": "asked"},
        start.headers,
    )
    assert erased.status_code == 201
    drain_until_caught_up(runtime)
    answer = client.get(f"/v1/memories/{start.memory['id']}", headers=start.headers).json()
    assert answer["status"] == "erased"
    # not expiry or erasure of the source: the raw bytes stay readable
    content = client.get(f"/v1/observations/{start.observation}/content", headers=start.headers)
    assert content.status_code == 200 and content.text == "The release ships on Friday."
    # not withdrawal: another memory citing the same source keeps its support
    other = client.get(f"/v1/memories/{sibling['id']}", headers=start.headers).json()["belief"]
    assert other["grade"] == "supported" and len(other["support"]) == 1
    # not archival of anything else: the sibling is listed and unflagged
    assert _listed(client, start) == [sibling["id"]]
    assert other["labels"]["archived"] is None


def test_erasing_the_source_leaves_other_memories_labels_alone(
    client: TestClient, start: Start, runtime: Runtime
) -> None:
    pinned = remember(client, start.headers, type="fact", content="Unrelated and pinned")
    post(client, f"/v1/memories/{pinned['id']}/pin", {}, start.headers)
    post(
        client,
        "/v1/erasures",
        {"observation_ids": [start.observation], "reason": "asked"},
        start.headers,
    )
    drain_until_caught_up(runtime)
    belief = client.get(f"/v1/memories/{pinned['id']}", headers=start.headers).json()["belief"]
    assert belief["labels"]["pinned"] is True and belief["labels"]["archived"] is None
    assert belief["grade"] == "unsupported"  # it never had support; nothing changed
