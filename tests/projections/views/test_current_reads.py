"""Reads by id in one round trip: the same answers whichever source knows the text
(this process's copy, recall's text index, or neither: the text read apart)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.views.current_beliefs import CurrentBelief, PendingBelief
from palimpsest.projections.views.current_reads import read_current, read_current_ids
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up


def _now() -> datetime:
    return datetime.now(UTC)


@pytest.mark.parametrize("source", ["copy", "text index", "apart"])
def test_a_current_read_serves_the_current_text_whichever_source_knows_its_digest(
    client: TestClient, tenant: Tenant, runtime: Runtime, source: str
) -> None:
    # Given a memory revised once, projected
    memory = remember(client, tenant.headers(), type="fact", content="Lives in Lyon")
    memory_id = uuid.UUID(memory["id"])
    post(
        client,
        f"/v1/memories/{memory_id}/versions",
        {"content": "Lives in Paris"},
        tenant.headers(),
    )
    if source == "text index":
        index_until_caught_up(runtime, tenant.id)
    else:
        drain_until_caught_up(runtime)
    if source != "copy":  # this process no longer holds the memory
        aggregate_cache(runtime.log).evict(tenant.id, {memory_id})
    # When it is read by id, alone and in a batch
    one = read_current(runtime.log, tenant.id, memory_id, _now())
    (listed,) = read_current_ids(runtime.log, tenant.id, [memory_id], _now(), content=True)
    # Then both serve the current version's text, with a salience score
    assert isinstance(one, CurrentBelief) and one.content == "Lives in Paris"
    assert isinstance(listed, CurrentBelief) and listed.content == "Lives in Paris"
    assert one.salience is not None and 0 < one.salience < 1
    (bare,) = read_current_ids(runtime.log, tenant.id, [memory_id], _now(), content=False)
    assert isinstance(bare, CurrentBelief) and bare.content is None


def test_a_read_by_id_is_pending_while_a_write_is_unprojected_and_unknown_ids_are_absent(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    memory = remember(client, tenant.headers(), type="fact", content="Lives in Lyon")
    memory_id = uuid.UUID(memory["id"])
    drain_until_caught_up(runtime)
    post(
        client, f"/v1/memories/{memory_id}/versions", {"content": "Lives in Oslo"}, tenant.headers()
    )
    answer = read_current(runtime.log, tenant.id, memory_id, _now())
    assert isinstance(answer, PendingBelief)  # never the older text
    assert answer.revision.published < answer.revision.requested
    with pytest.raises(NotFoundError):
        read_current(runtime.log, tenant.id, uuid.uuid4(), _now())
    assert read_current_ids(runtime.log, tenant.id, [uuid.uuid4()], _now(), content=True) == []
