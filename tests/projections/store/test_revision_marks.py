"""A write raises the requested revision of every memory it can change, in its own transaction."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant


def _requested(runtime: Runtime, tenant: Tenant) -> dict[str, int]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT memory_id, requested FROM "{schema}".revisions WHERE tenant_id = %s',
            (tenant.id,),
        ).fetchall()
    return {str(m): r for m, r in rows}


def _changed(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {m for m, r in after.items() if before.get(m) != r}


def test_a_new_memory_is_requested_at_its_own_position(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    created = remember(client, tenant.headers())
    assert _requested(runtime, tenant)[created["id"]] == created["position"]


def test_an_edge_marks_both_ends_and_nothing_else(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    a, b, bystander = (remember(client, headers) for _ in range(3))
    before = _requested(runtime, tenant)
    edge = post(
        client,
        f"/v1/memories/{a['id']}/edges",
        {"kind": "supersedes", "target_id": b["id"]},
        headers,
    ).json()
    after = _requested(runtime, tenant)
    assert _changed(before, after) == {a["id"], b["id"]}
    assert after[a["id"]] == after[b["id"]] == edge["position"]
    assert after[bystander["id"]] == bystander["position"]


def test_a_revision_marks_only_the_memory_it_revises_not_its_neighbours(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a chain c -> b -> a (c extends b, b conflicts with a)
    headers = tenant.headers()
    a, b, c = (remember(client, headers) for _ in range(3))
    post(
        client,
        f"/v1/memories/{b['id']}/edges",
        {"kind": "conflicts_with", "target_id": a["id"]},
        headers,
    )
    post(
        client, f"/v1/memories/{c['id']}/edges", {"kind": "extends", "target_id": b["id"]}, headers
    )
    before = _requested(runtime, tenant)
    # When a, at one end of the chain, gets a new version
    revised = post(
        client, f"/v1/memories/{a['id']}/versions", {"content": "revised"}, headers
    ).json()
    # Then only a is requested again: b's and c's beliefs read their own events
    # and their edges, none of which changed (the property test below checks
    # that marking never misses a belief that does change).
    after = _requested(runtime, tenant)
    assert _changed(before, after) == {a["id"]}
    assert after[a["id"]] == revised["position"]


def test_citing_an_observation_does_not_mark_the_memories_that_already_cite_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    shared = observe(client, headers, "shared evidence")
    first = remember(client, headers, evidence=[{"observation_id": shared, "start": 0, "end": 6}])
    before = _requested(runtime, tenant)
    second = remember(client, headers, evidence=[{"observation_id": shared, "start": 7, "end": 15}])
    after = _requested(runtime, tenant)
    assert _changed(before, after) == {second["id"]}
    assert after[first["id"]] == before[first["id"]]


def test_no_memory_event_is_ever_newer_than_its_requested_revision(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "some text here")
    items: list[dict[str, Any]] = [
        {
            "op": "create_memory",
            "type": "fact",
            "scope": "u",
            "content": f"m{i}",
            "evidence": [{"observation_id": obs, "start": 0, "end": 4}],
        }
        for i in range(5)
    ]
    items += [
        {"op": "add_edge", "memory_id": "$0", "kind": "extends", "target_id": "$1"},
        {"op": "add_version", "memory_id": "$2", "content": "again"},
    ]
    assert post(client, "/v1/batch", {"items": items}, headers).status_code == 201
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        lagging = conn.execute(
            f'SELECT e.originator_id FROM "{schema}"."{EVENTS_TABLE}" e '
            f'JOIN "{schema}".revisions r ON r.memory_id = e.originator_id '
            "WHERE e.tenant_id = %s GROUP BY e.originator_id, r.requested "
            "HAVING max(e.notification_id) > r.requested",
            (tenant.id,),
        ).fetchall()
    assert lagging == []


def test_if_marking_fails_the_event_is_not_recorded_either(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    # Given a database that refuses any new revision mark
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".refuse_mark() RETURNS trigger LANGUAGE plpgsql '
            "AS $$ BEGIN RAISE EXCEPTION 'marking refused'; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER refuse_mark BEFORE INSERT ON "{schema}".revisions '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".refuse_mark()'
        )
    headers = tenant.headers()
    before = snapshot()
    try:
        # When a memory is written
        as_a_client_sees_it = TestClient(client.app, raise_server_exceptions=False)
        response = as_a_client_sees_it.post(
            "/v1/memories", headers=headers, json={"type": "fact", "scope": "u", "content": "x"}
        )
    finally:
        with runtime.database.owner_connection() as conn:
            conn.execute(f'DROP TRIGGER refuse_mark ON "{schema}".revisions')
            conn.execute(f'DROP FUNCTION "{schema}".refuse_mark()')
    # Then it fails as a server error, and neither its events nor its payload were recorded
    assert response.status_code == 500
    assert problem_slug(response) == "internal-error"
    assert snapshot() == before


def test_contributions_record_their_proposer_in_the_same_transaction(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Withdrawing a proposer or a model (the history issue) marks exactly the memories
    # these rows name, so they must exist as soon as the contribution does.
    headers = tenant.headers()
    obs = observe(client, headers, "judged text")
    judged = remember(
        client,
        headers,
        model_id="judge-1.4",
        evidence=[{"observation_id": obs, "start": 0, "end": 6}],
    )
    plain = remember(client, headers, evidence=[{"observation_id": obs, "start": 0, "end": 6}])
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT model_id, memory_id, position FROM "{schema}".proposer_links'
            " WHERE tenant_id = %s ORDER BY position",
            (tenant.id,),
        ).fetchall()
    assert [(m, str(i), p) for m, i, p in rows] == [
        ("judge-1.4", judged["id"], judged["position"]),
        ("", plain["id"], plain["position"]),
    ]
