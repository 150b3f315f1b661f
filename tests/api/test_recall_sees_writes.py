"""Recall sees the caller's writes (issue 44, item 3).

A write answers once its events commit; the drains publish and index it after. A
recall that passes the ``position`` its caller's last write answered (``after``)
waits until that write is indexed, so it finds it, in every mode, and a revised
memory comes back with its new content, not ``pending``. The drains here run in
a background loop, as ``palimpsest serve`` runs them, woken by each write.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.recall.caught_up import caught_up
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import post, remember
from tests.api.live_server import live_server
from tests.conftest import (
    Tenant,
    drain_until_caught_up,
    index_until_caught_up,
    waiting_for_the_events_table,
)


@pytest.fixture
def served(runtime: Runtime) -> Iterator[TestClient]:
    """The app with the drains in a background loop, woken by every write, and the
    model loaded (as ``palimpsest serve`` loads it before it is ready)."""
    runtime.load_embedder()
    loop = DrainLoop(runtime.log, embedder=runtime.embedder, sweep_s=0.5)
    loop.start()
    try:
        with TestClient(create_app(ApiSettings(), runtime, wake=loop.wake)) as client:
            yield client
    finally:
        loop.stop()


def _recall(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    response = post(client, "/v1/recall", body, headers)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["hybrid", "vector", "text"])
def test_a_recall_after_a_write_finds_it(served: TestClient, tenant: Tenant, mode: str) -> None:
    headers = tenant.headers()
    content = f"The {mode} courier delivers parcels to the back door on Thursdays"
    written = remember(served, headers, type="fact", content=content)
    found = _recall(served, headers, query=content, mode=mode, after=written["position"])
    assert found["caught_up"] is True
    first = found["items"][0]
    assert (first["id"], first["status"], first["content"]) == (written["id"], "current", content)


def test_a_recall_after_a_revision_finds_the_new_content(
    served: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    memory = remember(served, headers, type="fact", content="The spare key is under the mat")
    _recall(served, headers, query="spare key", after=memory["position"])
    revised = post(
        served,
        f"/v1/memories/{memory['id']}/versions",
        {"content": "The spare key is with the neighbour at number 12"},
        headers,
    )
    assert revised.status_code == 201, revised.text
    found = _recall(
        served, headers, query="Where is the spare key?", after=revised.json()["position"]
    )
    [item] = [i for i in found["items"] if i["id"] == memory["id"]]
    assert item["status"] == "current"
    assert item["content"] == "The spare key is with the neighbour at number 12"


def test_caught_up_waits_for_publication_and_the_new_version_s_words(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given an indexed write, then one no drain has handled (this app runs none)
    headers = tenant.headers()
    earlier = remember(client, headers, type="note", content="Recycling goes out on Fridays")
    index_until_caught_up(runtime, tenant.id)
    memory = remember(client, headers, type="note", content="Bins go out on Tuesday night")
    position = memory["position"]
    assert not caught_up(runtime.log, tenant.id, position)
    # A recall after the earlier write does not wait for the later one
    assert caught_up(runtime.log, tenant.id, earlier["position"])
    # When it is published and indexed, it is caught up
    index_until_caught_up(runtime, tenant.id)
    assert caught_up(runtime.log, tenant.id, position)
    # And a new version is not, until its words are indexed too (published is not enough)
    revised = post(
        client, f"/v1/memories/{memory['id']}/versions", {"content": "Wednesday"}, headers
    )
    again = revised.json()["position"]
    assert not caught_up(runtime.log, tenant.id, again)
    drain_until_caught_up(runtime)
    assert not caught_up(runtime.log, tenant.id, again)
    index_until_caught_up(runtime, tenant.id)
    assert caught_up(runtime.log, tenant.id, again)


def test_a_recall_whose_writes_are_not_indexed_in_time_says_so(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No drain runs here: the wait's bound runs out and the answer says it.
    monkeypatch.setattr("palimpsest.api.routers._recall.WAIT_S", 0.2)
    headers = tenant.headers()
    written = remember(client, headers, type="note", content="The plants need water")
    found = _recall(client, headers, query="plants", after=written["position"])
    assert found["caught_up"] is False and found["items"] == []
    assert _recall(client, headers, query="plants")["caught_up"] is None


@pytest.mark.parametrize("after", [-1, 2**63, "12", 1.5, True])
def test_a_bad_after_is_refused(client: TestClient, tenant: Tenant, after: object) -> None:
    response = post(client, "/v1/recall", {"query": "plants", "after": after}, tenant.headers())
    assert response.status_code == 422
    assert response.json()["type"].endswith("validation-error")


def _until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.01)


def test_a_recall_after_a_write_that_shared_a_group_commit_finds_it(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a real server (no drain yet) whose writes keep the lead of their group
    # until it commits, as `palimpsest serve`'s processes do, and the events table held
    # by another transaction: another tenant's write waits on it, and two writes of
    # the caller's tenant sent then queue behind it for one group.
    runtime.load_embedder()
    monkeypatch.setattr(runtime.log.group, "ahead", 0)
    schema, group = runtime.database.schema, runtime.log.group
    headers, other = tenant.headers("writer"), other_tenant.headers("writer")
    written: dict[str, Any] = {}
    texts = {name: f"The {name} shed key is blue" for name in ("first", "garden", "garage")}

    def write(name: str, base: str, as_: dict[str, str] = headers) -> threading.Thread:
        def run() -> None:
            body = {"type": "note", "scope": "user", "content": texts[name]}
            written[name] = httpx.post(f"{base}/v1/memories", json=body, headers=as_, timeout=120)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with live_server(create_app(ApiSettings(), runtime)) as base:
        with runtime.database.owner_connection() as holder:
            holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
            threads = [write("first", base, other)]
            _until(lambda: waiting_for_the_events_table(runtime) > 0, 20, "a write waits")
            group.sizes.clear()
            threads += [write("garden", base), write("garage", base)]
            _until(lambda: group.queued == 2, 20, "two writes queue behind it")
            holder.commit()
        for thread in threads:
            thread.join(30)
        answers = {name: response.json() for name, response in written.items()}
        assert all(r.status_code == 201 for r in written.values()), answers
        # They did share one transaction: the group of two, their events one xid.
        assert list(group.sizes) == [2]
        with runtime.database.owner_connection(autocommit=True) as conn:
            xids = conn.execute(
                f'SELECT DISTINCT xmin::text FROM "{schema}".{EVENTS_TABLE}'
                " WHERE originator_id = ANY(%s)",
                ([uuid.UUID(answers[n]["id"]) for n in ("garden", "garage")],),
            ).fetchall()
        assert len(xids) == 1
        name = min(("garden", "garage"), key=lambda n: answers[n]["position"])
        earlier = answers[name]

        # When the writer recalls with the earlier write's position, the recall waits
        # for it (the drains only start once the recall is waiting, or has answered)
        found: dict[str, Any] = {}

        def ask() -> None:
            found["answer"] = httpx.post(
                f"{base}/v1/recall",
                json={"query": texts[name], "after": earlier["position"]},
                headers=headers,
                timeout=120,
            )

        asking = threading.Thread(target=ask)
        asking.start()
        _until(
            lambda: runtime.publications.waiting() > 0 or "answer" in found,
            20,
            "the recall waits or answers",
        )
        index_until_caught_up(runtime, tenant.id)
        asking.join(120)

    # Then it finds that write, current, caught up
    response = found["answer"]
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["caught_up"] is True
    first = answer["items"][0]
    assert (first["id"], first["status"]) == (earlier["id"], "current")
