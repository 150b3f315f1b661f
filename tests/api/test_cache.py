"""The version cache: bounded, evictable, and never the reason an answer changes."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from fastapi.testclient import TestClient

from palimpsest.domain.belief import MemoryFacts
from palimpsest.projections.recall.query_vectors import query_vectors
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.version_cache import VersionCache
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant


def test_eviction_changes_no_row_and_no_answer(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    positions = [memory["position"]]
    for i in range(3):
        positions.append(
            post(
                client, f"/v1/memories/{memory['id']}/versions", {"content": f"v{i}"}, headers
            ).json()["position"]
        )
    other = remember(client, other_tenant.headers())

    def answers() -> list[dict[str, Any]]:
        return [
            client.get(
                f"/v1/memories/{memory['id']}", headers=headers, params={"at_position": p}
            ).json()
            for p in positions
        ]

    cold = answers()
    client.get(
        f"/v1/memories/{other['id']}",
        headers=other_tenant.headers(),
        params={"at_position": other["position"]},
    )
    cache = runtime.version_cache
    hits = cache.stats().hits
    assert answers() == cold  # warm: served from the cache, the same
    assert cache.stats().hits >= hits + len(positions)

    # Both tenants ask the same question: each has its own remembered query vector.
    for asker in (tenant, other_tenant):
        asked = {"query": "which theme does the user prefer?"}
        assert post(client, "/v1/recall", asked, asker.headers()).status_code == 200
    before = snapshot()
    response = post(client, "/v1/admin/cache/evict", {}, headers)
    assert response.status_code == 200, response.text
    assert response.json()["evicted"] >= len(positions)
    assert response.json()["aggregates_evicted"] >= 1  # the memory writes started from
    assert snapshot() == before  # nothing durable changed
    assert answers() == cold  # and no answer did
    assert response.json()["query_vectors_evicted"] == 1
    # Only this tenant's entries went.
    left = cache.evict(other_tenant.id)
    assert left >= 1
    assert query_vectors(runtime.embedder).evict(other_tenant.id) == 1

    reader = post(client, "/v1/admin/cache/evict", {}, tenant.headers("reader"))
    assert reader.status_code == 403 and problem_slug(reader) == "forbidden"
    assert post(client, "/v1/admin/cache/evict", {}, {}).status_code == 401


def test_the_cache_is_bounded_least_recently_used_first() -> None:
    cache = VersionCache(max_entries=3)
    tenant = uuid4()
    facts = [MemoryFacts(uuid4(), "fact", "user", None, None, (uuid4(),)) for _ in range(5)]
    for i, f in enumerate(facts[:3]):
        cache.put((tenant, f.memory_id, i), f)
    assert cache.get((tenant, facts[0].memory_id, 0)) == facts[0]  # now most recent
    cache.put((tenant, facts[3].memory_id, 3), facts[3])
    assert cache.get((tenant, facts[1].memory_id, 1)) is None  # the least recent went
    assert cache.stats().entries == 3 and cache.stats().evicted == 1
    cache.resize(1)
    assert cache.stats().entries == 1
    cache.resize(0)
    cache.put((tenant, facts[4].memory_id, 4), facts[4])
    assert cache.stats().entries == 0  # 0 disables it
