"""Tenant deletion: confirmed, closed at once, erased in batches, a receipt left."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.drains._tenant_erasure import erase_tenant
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.work_due import marked_tenants
from tests.api.helpers import observe, post, problem_slug, remember
from tests.api.sentinel_scan import database_places, statistics_places
from tests.conftest import Tenant, count_events, drain_until_caught_up, store_snapshot
from tests.projections.drains.killing import drain_process, kill_mid_write


def _populate(client: TestClient, headers: dict[str, str], sentinel: str) -> tuple[int, int]:
    observations = [observe(client, headers, f"{sentinel} said thing {i}") for i in range(5)]
    for i, obs in enumerate(observations):
        remember(
            client,
            headers,
            content=f"{sentinel} thing {i}",
            evidence=[{"observation_id": obs, "start": 0, "end": len(sentinel)}],
        )
    remember(client, headers, content=f"{sentinel} with no evidence")
    return len(observations), len(observations) + 1


def _erasure_pass(runtime: Runtime, tenant: Tenant, limit: int) -> int:
    """One erasure pass over this test's tenant only, as the drain runs it: the
    session's store holds other tests' deleted tenants, whose batches are not ours."""
    seen = marked_tenants(runtime.log.datastore, "deletion").get(tenant.id)
    if seen is None:
        return 0
    return erase_tenant(runtime.log, tenant.id, seen, limit=limit)


def test_deletion_needs_a_fresh_confirmation_and_an_admin(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    writer, reader = tenant.headers("writer"), tenant.headers("reader")
    observe(client, headers, "kept")
    before = snapshot()
    first = client.delete("/v1/tenant", headers=headers)
    assert first.status_code == 428 and problem_slug(first) == "confirmation-required"
    token = first.json()["confirmation_token"]
    wrong = client.delete("/v1/tenant?confirm=del_nope", headers=headers)
    assert wrong.status_code == 428 and wrong.json()["confirmation_token"] == token
    for who in (writer, reader):
        assert client.delete(f"/v1/tenant?confirm={token}", headers=who).status_code == 403
    assert client.delete(f"/v1/tenant?confirm={token}").status_code == 401
    assert snapshot() == before
    # A write in between makes the token stale: the caller confirms what it saw.
    observe(client, headers, "written after the token")
    stale = client.delete(f"/v1/tenant?confirm={token}", headers=headers)
    assert stale.status_code == 428 and stale.json()["confirmation_token"] != token
    assert client.get("/v1/memories", headers=headers).status_code == 200


@pytest.mark.slow
def test_a_deleted_tenant_is_closed_at_once_and_erased_in_resumable_batches(
    client: TestClient,
    tenant: Tenant,
    other_tenant: Tenant,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = tenant.headers()
    sentinel = f"SENTINEL{tenant.id.hex}"
    observations, memories = _populate(client, headers, sentinel)
    theirs = remember(client, other_tenant.headers(), content="other tenant's memory")
    drain_until_caught_up(runtime)
    token = client.delete("/v1/tenant", headers=headers).json()["confirmation_token"]
    accepted = client.delete(f"/v1/tenant?confirm={token}&reason=contract+ended", headers=headers)
    assert accepted.status_code == 202, accepted.text
    receipt = accepted.json()
    assert receipt["kind"] == "tenant_deletion" and receipt["status"] == "in_progress"
    assert receipt["reason"] == "contract ended"

    # Closed: every endpoint but the receipt answers 410, naming the deletion.
    for method, path in (
        ("GET", "/v1/memories"),
        ("GET", "/v1/tenant/export"),
        ("POST", "/v1/observations"),
        ("DELETE", "/v1/tenant"),
    ):
        closed = client.request(method, path, headers=headers, json={"content": "x"})
        assert closed.status_code == 410 and problem_slug(closed) == "tenant-deleted", path
        assert closed.json()["erasure"]["id"] == receipt["id"]

    # A pass SIGKILLed inside its write (its events inserted, held where it marks the
    # batch's observations erased) leaves nothing; the next passes go on.
    assert _erasure_pass(runtime, tenant, limit=2) == 4
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        left = conn.execute(
            f'SELECT observation_id FROM "{schema}".observation_deadlines'
            " WHERE tenant_id = %s AND erased_position IS NULL ORDER BY observation_id LIMIT 1",
            (tenant.id,),
        ).fetchone()
    assert left is not None
    erased_before = store_snapshot(runtime)
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: drain_process(
            runtime,
            "from uuid import UUID\n"
            "from palimpsest.projections.drains._tenant_erasure import erase_tenant\n"
            f"erase_tenant(log, UUID('{tenant.id}'), 0, limit=2)",
        ),
        hold="SELECT 1 FROM {schema}.observation_deadlines WHERE observation_id = %s FOR UPDATE",
        params=(left[0],),
        table="observation_deadlines",
    )
    # Not an event, not a row more: the write reads the freed digests before it sends
    # COMMIT (store/_pipelined.py), so the kill lands before COMMIT is sent.
    assert store_snapshot(runtime) == erased_before
    in_progress = client.get(f"/v1/erasures/{receipt['id']}", headers=headers).json()
    assert in_progress["status"] == "in_progress" and in_progress["batches"] == 1
    passes = 0
    while _erasure_pass(runtime, tenant, limit=2):
        passes += 1
    assert passes >= 2
    # Complete: no deletion work is due for the tenant any more.
    assert _erasure_pass(runtime, tenant, limit=2) == 0
    assert tenant.id not in marked_tenants(runtime.log.datastore, "deletion")
    drain_until_caught_up(runtime)

    done = client.get(f"/v1/erasures/{receipt['id']}", headers=headers).json()
    assert done["status"] == "completed"
    assert done["removed"]["observations"] == observations
    assert done["removed"]["memories"] == memories
    assert count_events(runtime, tenant, "ObservationErased") == observations
    assert count_events(runtime, tenant, "MemoryErased") == memories
    assert count_events(runtime, tenant, "TenantDeleted") == 1
    assert database_places(runtime, sentinel) | statistics_places(runtime, sentinel) == set()
    # Another tenant is untouched.
    other = client.get(f"/v1/memories/{theirs['id']}", headers=other_tenant.headers())
    assert other.json()["status"] == "current"
    # The receipt is what is left; nothing else answers.
    assert client.get("/v1/revision", headers=headers).status_code == 410
    again = post(client, "/v1/erasures", {"memory_ids": [theirs["id"]], "reason": "x"}, headers)
    assert again.status_code == 410
