"""A batch read by id mixes memories whose texts come from different sources in one
statement: this process's copies (their last versions' ids and digests, sent as
arrays in binary), recall's text index, and neither (read apart). Each memory gets its
own current text, whatever the others' sources."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.views.current_beliefs import CurrentBelief
from palimpsest.projections.views.current_reads import read_current, read_current_ids
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up


def _revised(client: TestClient, tenant: Tenant, texts: list[str]) -> uuid.UUID:
    """A fact with one version per text, in order."""
    memory_id = remember(client, tenant.headers(), type="fact", content=texts[0])["id"]
    for text in texts[1:]:
        post(client, f"/v1/memories/{memory_id}/versions", {"content": text}, tenant.headers())
    return uuid.UUID(memory_id)


def test_a_batch_serves_each_memory_its_own_text_whichever_source_knows_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given one memory known to recall's text index only, one known to no source but
    # its versions (read apart), and two whose last versions this process holds
    indexed = _revised(client, tenant, ["Works at Acme", "Works at Initech"])
    index_until_caught_up(runtime, tenant.id)
    apart = _revised(client, tenant, ["Drives a bike"])
    copies = [
        _revised(client, tenant, ["Lives in Lyon", "Lives in Oslo", "Lives in Paris"]),
        _revised(client, tenant, ["Likes jazz", "Likes opera"]),
    ]
    drain_until_caught_up(runtime)
    aggregate_cache(runtime.log).evict(tenant.id, {indexed, apart})
    cache = aggregate_cache(runtime.log)
    assert all(cache.peek(tenant.id, m) is not None for m in copies)
    wanted = [copies[0], indexed, apart, copies[1]]
    now = datetime.now(UTC)

    # When they are read together, with and without their texts
    listed = read_current_ids(runtime.log, tenant.id, wanted, now, content=True)
    bare = read_current_ids(runtime.log, tenant.id, wanted, now, content=False)

    # Then each is current with its own current text (or none when not asked for)
    texts = {item.id: item.content for item in listed if isinstance(item, CurrentBelief)}
    assert texts == {
        copies[0]: "Lives in Paris",
        indexed: "Works at Initech",
        apart: "Drives a bike",
        copies[1]: "Likes opera",
    }
    assert {item.id: (item.status, item.content) for item in bare} == {  # type: ignore[union-attr]
        m: ("current", None) for m in wanted
    }
    # and as each is read alone
    for memory_id, text in texts.items():
        one = read_current(runtime.log, tenant.id, memory_id, now)
        assert isinstance(one, CurrentBelief) and one.content == text
