"""Supersession is a structural archival: hidden from ordinary reads, listings and
recall; surfaced, flagged, by ``include_archived``; not undone by ``restore``, but by
retracting the edge's decision (issue 12, item 1)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up


def _current(client: TestClient, memory_id: str, headers: dict[str, str]) -> dict[str, Any]:
    answer = client.get(f"/v1/memories/{memory_id}", headers=headers).json()
    assert answer["status"] == "current", answer
    return dict(answer["belief"])


def _listed(client: TestClient, headers: dict[str, str], project: str, **params: Any) -> Any:
    response = client.get("/v1/memories", headers=headers, params={"project": project, **params})
    assert response.status_code == 200, response.text
    return {i["id"]: i for i in response.json()["items"]}


def _recalled(client: TestClient, headers: dict[str, str], project: str, **body: Any) -> Any:
    query = {"query": "which editor theme does the user like", "project": project, "k": 5}
    response = post(client, "/v1/recall", {**query, **body}, headers)
    assert response.status_code == 200, response.text
    return {i["id"]: i for i in response.json()["items"]}


def _requested(runtime: Runtime, memory_id: str) -> int:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT requested FROM "{schema}".revisions WHERE memory_id = %s',
            (UUID(memory_id),),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_superseded_memory_leaves_reads_listings_and_recall_until_the_edge_is_retracted(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers()
    project = f"p-{tenant.id.hex[:8]}"
    old = remember(
        client, headers, type="fact", project=project, content="The user likes a dark editor theme"
    )
    new = remember(
        client, headers, type="fact", project=project, content="The user likes a light editor theme"
    )
    edge = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    assert edge.status_code == 201, edge.text
    edge_id = edge.json()["id"]
    assert _requested(runtime, old["id"]) == edge.json()["position"]  # marked for revision
    index_until_caught_up(runtime, tenant.id)

    archived = _current(client, old["id"], headers)["labels"]["archived"]
    assert archived == {"reason": "superseded", "superseded_by": new["id"], "edge_id": edge_id}
    assert _current(client, new["id"], headers)["labels"]["archived"] is None
    assert list(_listed(client, headers, project)) == [new["id"]]
    flagged = _listed(client, headers, project, include_archived="true")
    assert flagged[old["id"]]["belief"]["labels"]["archived"]["reason"] == "superseded"
    assert list(_recalled(client, headers, project)) == [new["id"]]
    surfaced = _recalled(client, headers, project, include_archived=True)
    assert surfaced[old["id"]]["belief"]["labels"]["archived"]["superseded_by"] == new["id"]

    # restore does not undo it: a problem of its own, pointing at the edge; nothing written.
    before = snapshot()
    refused = post(client, f"/v1/memories/{old['id']}/restore", {"reason": "undo"}, headers)
    assert refused.status_code == 409 and problem_slug(refused) == "structurally-archived"
    assert edge_id in refused.json()["detail"]
    assert snapshot() == before

    # Retracting the edge (a decision, on its source) does; the same again replays.
    path = f"/v1/memories/{new['id']}/edges/{edge_id}/retract"
    retracted = post(client, path, {"reason": "it was not an update"}, headers)
    assert retracted.status_code == 201, retracted.text
    decision = retracted.json()
    assert decision["kind"] == "retract_edge" and decision["reason"] == "it was not an update"
    assert decision["accepted"] == [
        {
            "op": "retract_edge",
            "edge_id": edge_id,
            "memory_id": new["id"],
            "kind": "supersedes",
            "target_id": old["id"],
        }
    ]
    assert _requested(runtime, old["id"]) == decision["position"]
    assert _requested(runtime, new["id"]) == decision["position"]
    before = snapshot()
    again = post(client, path, {}, headers)
    assert again.status_code == 200 and again.json() == {**decision, "replayed": True}
    assert snapshot() == before
    index_until_caught_up(runtime, tenant.id)
    belief = _current(client, old["id"], headers)
    assert belief["labels"]["archived"] is None and belief["labels"]["superseded_by"] == []
    assert set(_listed(client, headers, project)) == {new["id"], old["id"]}
    assert set(_recalled(client, headers, project)) == {new["id"], old["id"]}
    history = client.get(f"/v1/memories/{old['id']}/history", headers=headers).json()
    assert "EdgeRetracted" in {e["type"] for e in history["events"]}

    # The same kind of edge may be added again: a new edge, archiving it again.
    readded = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    assert readded.status_code == 201 and readded.json()["id"] != edge_id
    drain_until_caught_up(runtime)
    archived = _current(client, old["id"], headers)["labels"]["archived"]
    assert archived["edge_id"] == readded.json()["id"]
    # Replaying the log (verify) computes the same beliefs, retraction included.
    assert verify(runtime.database, tenant=tenant.id).divergences == []


def test_resolving_a_conflict_archives_the_losing_side(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    project = f"p-{tenant.id.hex[:8]}"
    loser = remember(client, headers, project=project)
    winner = remember(client, headers, project=project, content="Prefers light mode")
    conflict = {"kind": "conflicts_with", "target_id": loser["id"]}
    assert post(client, f"/v1/memories/{winner['id']}/edges", conflict, headers).status_code == 201
    drain_until_caught_up(runtime)
    assert _current(client, loser["id"], headers)["grade"] == "contested"
    assert set(_listed(client, headers, project)) == {winner["id"], loser["id"]}
    resolve = {"kind": "supersedes", "target_id": loser["id"]}
    assert post(client, f"/v1/memories/{winner['id']}/edges", resolve, headers).status_code == 201
    drain_until_caught_up(runtime)
    lost = _current(client, loser["id"], headers)
    assert lost["labels"]["archived"]["superseded_by"] == winner["id"]
    assert _current(client, winner["id"], headers)["grade"] != "contested"
    assert list(_listed(client, headers, project)) == [winner["id"]]


def test_retracting_an_edge_is_refused_without_writing_anything(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    old = remember(client, headers)
    new = remember(client, headers, content="Prefers light mode")
    edge = post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    ).json()
    reader, stranger = tenant.headers("reader"), other_tenant.headers()
    before = snapshot()
    for path, body, who, status, slug in (
        (f"/v1/memories/{old['id']}/edges/{edge['id']}/retract", {}, headers, 404, "not-found"),
        (f"/v1/memories/{new['id']}/edges/{old['id']}/retract", {}, headers, 404, "not-found"),
        (
            f"/v1/memories/{new['id']}/edges/{edge['id']}/retract",
            {},
            reader,
            403,
            "forbidden",
        ),
        (
            f"/v1/memories/{new['id']}/edges/{edge['id']}/retract",
            {},
            stranger,
            404,
            "not-found",
        ),
        (
            f"/v1/memories/{new['id']}/edges/{edge['id']}/retract",
            {"reason": "  "},
            headers,
            422,
            "validation-error",
        ),
        (
            f"/v1/memories/{new['id']}/edges/{edge['id']}/retract",
            {"why": "x"},
            headers,
            422,
            "validation-error",
        ),
    ):
        response = post(client, path, body, who)
        assert response.status_code == status, (path, body, response.text)
        assert problem_slug(response) == slug
    assert snapshot() == before
