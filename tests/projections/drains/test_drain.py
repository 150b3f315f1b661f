"""The revision drain and the current read: never a stale belief, always caught up in the end."""

from __future__ import annotations

import threading
import time
from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from palimpsest.projections.drains.revision import _publish, drain_revisions, drain_tenant
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.store.work_due import marked_tenants
from palimpsest.projections.views.belief_facts import memory_facts
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up


def _read(client: TestClient, memory_id: str, headers: dict[str, str], **params: Any) -> Any:
    return client.get(f"/v1/memories/{memory_id}", headers=headers, params=params)


def test_a_new_memory_is_pending_until_drained_then_current(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "I prefer dark mode.")
    created = remember(client, headers, evidence=[{"observation_id": obs, "start": 2, "end": 18}])
    pending = _read(client, created["id"], headers)
    assert pending.status_code == 200
    assert pending.headers["Retry-After"] == "1"
    body = pending.json()
    assert body["status"] == "pending"
    assert "belief" not in body
    assert body["revision"] == {"requested": created["position"], "published": 0}
    drain_until_caught_up(runtime)
    current = _read(client, created["id"], headers).json()
    assert current["status"] == "current"
    assert current["revision"] == {
        "requested": created["position"],
        "published": created["position"],
    }
    assert current["belief"]["current_version_id"] == created["version_id"]
    assert current["belief"]["grade"] == "supported"


def test_an_accepted_correction_is_never_served_around(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given an old preference that is current
    headers = tenant.headers()
    old = remember(client, headers, content="Prefers dark mode")
    drain_until_caught_up(runtime)
    assert _read(client, old["id"], headers).json()["status"] == "current"
    # When a newer memory supersedes it
    new = remember(client, headers, content="Switched to light mode")
    post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    # Then the old one is pending, not served with its stale labels
    assert _read(client, old["id"], headers).json()["status"] == "pending"
    # And once drained it says it was superseded, and by which memory
    drain_until_caught_up(runtime)
    belief = _read(client, old["id"], headers).json()["belief"]
    assert belief["labels"]["superseded_by"] == [new["id"]]
    assert {"code": "superseded", "by": new["id"]}.items() <= belief["reasons"][1].items()


def test_many_requests_for_one_memory_coalesce_into_one_recompute(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    for i in range(5):
        post(client, f"/v1/memories/{created['id']}/versions", {"content": f"v{i}"}, headers)
    drain_until_caught_up(runtime)  # everything else is now published
    for i in range(5):
        post(client, f"/v1/memories/{created['id']}/versions", {"content": f"w{i}"}, headers)
    report = drain_revisions(runtime.log)
    assert (report.claimed, report.published) == (1, 1)
    assert _read(client, created["id"], headers).json()["status"] == "current"


def test_publishing_never_moves_a_belief_backwards(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    revised = post(
        client, f"/v1/memories/{created['id']}/versions", {"content": "newer"}, headers
    ).json()
    drain_until_caught_up(runtime)
    facts = memory_facts(runtime.log, tenant.id, UUID(created["id"]))
    assert facts is not None
    # A slow drain that started before the revision publishes late
    _publish(runtime.log, tenant.id, facts, created["position"])
    current = _read(client, created["id"], headers).json()
    assert current["status"] == "current"
    assert current["revision"]["published"] == revised["position"]
    assert current["belief"]["current_version_id"] == revised["version_id"]


def test_concurrent_drains_publish_everything_exactly_once(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    items = [
        {"op": "create_memory", "type": "fact", "scope": "u", "content": f"m{i}"} for i in range(60)
    ]
    ids = [r["id"] for r in post(client, "/v1/batch", {"items": items}, headers).json()["results"]]
    published: list[int] = []
    threads = [
        threading.Thread(target=lambda: published.append(drain_until_caught_up(runtime)))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(published) >= len(ids)
    assert all(_read(client, m, headers).json()["status"] == "current" for m in ids)


def test_a_killed_drains_claim_is_taken_over_after_its_lease(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a drain that claimed a memory and died before publishing
    headers = tenant.headers()
    created = remember(client, headers)
    drain_until_caught_up(runtime)
    post(client, f"/v1/memories/{created['id']}/versions", {"content": "x"}, headers)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f"UPDATE \"{schema}\".revisions SET claimed_until = now() + interval '1 hour'"
            " WHERE memory_id = %s",
            (created["id"],),
        )
    # Then other drains skip it while the lease holds
    assert drain_revisions(runtime.log).claimed == 0
    # And take it over once the lease has expired
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f"UPDATE \"{schema}\".revisions SET claimed_until = now() - interval '1 s'"
            " WHERE memory_id = %s",
            (created["id"],),
        )
    assert drain_revisions(runtime.log).published == 1
    assert _read(client, created["id"], headers).json()["status"] == "current"


def test_wait_returns_the_belief_as_soon_as_it_is_published(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    drainer = threading.Timer(0.3, lambda: drain_until_caught_up(runtime))
    drainer.start()
    started = time.monotonic()
    answer = _read(client, created["id"], headers, wait=10).json()
    drainer.join()
    assert answer["status"] == "current"
    assert time.monotonic() - started < 10


def test_wait_gives_up_with_pending_after_its_limit(client: TestClient, tenant: Tenant) -> None:
    created = remember(client, tenant.headers())
    answer = _read(client, created["id"], tenant.headers(), wait=0.2).json()
    assert answer["status"] == "pending"


def test_bad_wait_values_and_unknown_memories_are_refused(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    created = remember(client, tenant.headers())
    for wait in ("31", "-1", "soon"):
        response = _read(client, created["id"], tenant.headers(), wait=wait)
        assert response.status_code == 422
        assert problem_slug(response) == "validation-error"
    response = _read(client, created["id"], other_tenant.headers())
    assert response.status_code == 404
    assert problem_slug(response) == "not-found"


def test_revision_status_counts_dirty_memories_and_their_age(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    created = [remember(client, headers) for _ in range(3)]
    status = client.get("/v1/revision", headers=headers).json()
    assert status["dirty_memories"] == 3
    assert status["log_head"] >= created[-1]["position"]
    assert status["oldest_dirty_age_s"] >= 0
    drain_until_caught_up(runtime)
    after = client.get("/v1/revision", headers=headers).json()
    assert after["dirty_memories"] == 0
    assert after["oldest_dirty_age_s"] is None
    assert after["drain_throughput_per_s"] >= 3 / 60
    metrics = client.get("/metrics").text
    for figure in ("log_head", "dirty_memories", "oldest_dirty_age_s", "drain_throughput_per_s"):
        assert f'palimpsest_revision{{figure="{figure}"}}' in metrics
    remember(client, headers)
    dirty = [
        line
        for line in client.get("/metrics").text.splitlines()
        if line.startswith('palimpsest_revision{figure="dirty_memories"}')
    ]
    assert float(dirty[0].split()[-1]) >= 1


def test_an_observations_milestones_are_reached_one_by_one(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = post(client, "/v1/observations", {"content": "We ship on Friday."}, headers).json()

    def milestones() -> dict[str, Any]:
        body = client.get(f"/v1/observations/{obs['id']}", headers=headers).json()
        return dict(body["milestones"])

    captured = milestones()
    assert captured["captured"]["at"] and captured["formed"] is None
    assert captured["indexed"] is None and captured["published"] is None
    remember(client, headers, evidence=[{"observation_id": obs["id"], "start": 3, "end": 17}])
    formed = milestones()
    assert formed["formed"]["at"] >= formed["captured"]["at"]
    assert formed["published"] is None
    drain_until_caught_up(runtime)
    published = milestones()
    assert published["published"]["at"] >= published["formed"]["at"]
    # A second memory citing it makes it unpublished again until that one is drained
    remember(client, headers, evidence=[{"observation_id": obs["id"], "start": 0, "end": 2}])
    assert milestones()["published"] is None
    drain_until_caught_up(runtime)
    assert milestones()["published"] is not None


def test_a_batch_that_empties_its_tenant_records_it_clean_and_a_later_mark_keeps_it_due(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given two dirty memories, fewer than a batch, and the tenant's mark as seen.
    headers = tenant.headers()
    first = remember(client, headers, content="Prefers tea")
    remember(client, headers, content="Prefers green tea")
    seen = marked_tenants(runtime.log.datastore, "revision")[tenant.id]

    # When one batch drains them, the tenant is recorded clean by that call: the
    # next pass does not list it, so it claims nothing more.
    report = drain_tenant(runtime.log, tenant.id, seen)
    assert (report.claimed, report.published, report.more) == (2, 2, False)
    assert tenant.id not in marked_tenants(runtime.log.datastore, "revision")
    assert _read(client, first["id"], headers).json()["status"] == "current"

    # A write committed after the mark a batch read keeps the tenant due, even when
    # that batch drains the write too: its mark is above what the batch saw.
    later = remember(client, headers, content="Prefers black tea")  # the mark seen is older
    assert drain_tenant(runtime.log, tenant.id, seen).claimed == 1
    assert _read(client, later["id"], headers).json()["status"] == "current"
    assert tenant.id in marked_tenants(runtime.log.datastore, "revision")
    # The next pass claims nothing and records it clean.
    drain_until_caught_up(runtime)
    assert tenant.id not in marked_tenants(runtime.log.datastore, "revision")


def test_a_belief_publishes_its_labels_exactly_whatever_they_hold(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    """The publish sends each column as an array: text an array literal would
    escape (quotes, backslashes, braces, commas, the word NULL) comes back as
    written, and a missing project stays SQL NULL, never the text 'NULL'."""
    headers = tenant.headers()
    scope = 'team "core" \\ {a,b} NULL é 🙂'
    made = [
        remember(client, headers, scope=scope, project="NULL", topic='t "1", {x}'),
        remember(client, headers, scope=scope),
    ]
    drain_until_caught_up(runtime)
    read = [_read(client, m["id"], headers).json() for m in made]
    assert [r["status"] for r in read] == ["current", "current"]
    assert [r["belief"]["applicability"] for r in read] == [
        {"scope": scope, "project": "NULL"},
        {"scope": scope, "project": None},
    ]
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            f'SELECT memory_id::text AS id, scope, project, topic FROM "{runtime.database.schema}"'
            ".beliefs WHERE memory_id = ANY(%s::uuid[])",
            ([m["id"] for m in made],),
        )
        rows = [(r["id"], r["scope"], r["project"], r["topic"]) for r in cur]
    assert sorted(rows) == sorted(
        [(made[0]["id"], scope, "NULL", 't "1", {x}'), (made[1]["id"], scope, None, None)]
    )
