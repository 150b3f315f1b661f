"""Recall and contradiction candidates with the real model (all-MiniLM-L6-v2).

Similarity only recalls: these tests check that meaning finds memories, that
filters hold inside the database even when they are selective, and that a
potential contradiction is reported without anything being written.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.recall._large_selections import LargeSelections
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.candidates import candidate_pairs
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up


def _recall(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    response = post(client, "/v1/recall", body, headers)
    assert response.status_code == 200, response.text
    return response.json()


def test_paraphrases_rank_above_unrelated_memories(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    texts = {
        "dark": "The user prefers dark mode in the code editor",
        "tea": "She drinks green tea every morning",
        "deploy": "Production deploys happen on Friday afternoons",
        "alice": "The weekly sync with Alice moved to Tuesday",
    }
    ids = {k: remember(client, headers, type="fact", content=t)["id"] for k, t in texts.items()}
    index_until_caught_up(runtime, tenant.id)
    for query, expected in (
        ("Which colour theme does the user like in the IDE?", "dark"),
        ("What does she have to drink early in the day?", "tea"),
        ("When do we ship releases to prod?", "deploy"),
        ("When is the meeting with Alice now?", "alice"),
    ):
        found = _recall(client, headers, query=query, k=4)
        first, *rest = found["items"]
        assert first["id"] == ids[expected], (query, found)
        assert all(first["similarity"] > r["similarity"] for r in rest)
        assert first["status"] == "current" and first["content"] == texts[expected]
        assert first["rank"]["decided_by"] == "first" and found["strategy"] in ("hnsw", "exact")


def _server_timing(response: Any) -> dict[str, float]:
    """The metrics of a ``Server-Timing`` header, by name, in their order."""
    metrics: dict[str, float] = {}
    for metric in response.headers["server-timing"].split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        [duration] = [float(p.removeprefix("dur=")) for p in params if p.startswith("dur=")]
        metrics[name] = duration
    return metrics


@pytest.mark.parametrize("mode", ["hybrid", "vector", "text"])
def test_server_timing_splits_the_search_into_its_searches_and_its_ranking(
    client: TestClient, tenant: Tenant, runtime: Runtime, mode: str
) -> None:
    # Which part of a slow recall was slow: the embedding, the searches, the ranking.
    headers = tenant.headers()
    written = remember(client, headers, type="note", content="The standup is at 9:30")
    index_until_caught_up(runtime, tenant.id)
    body = {"query": "when is the standup", "mode": mode}
    response = post(client, "/v1/recall", body, headers)
    assert response.status_code == 200, response.text
    timing = _server_timing(response)
    assert list(timing) == ["embed", "search", "index", "rank"]
    assert all(ms >= 0 for ms in timing.values())
    assert (timing["embed"] > 0) == (mode != "text")  # text mode embeds nothing
    # The parts are of the search, rounded each to 0.01 ms.
    assert timing["index"] + timing["rank"] <= timing["search"] + 0.02
    waited = post(client, "/v1/recall", {**body, "after": written["position"]}, headers)
    assert list(_server_timing(waited)) == ["wait", "embed", "search", "index", "rank"]


def test_recall_stamps_accesses_and_equal_relevance_ranks_by_salience(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    a = remember(client, headers, type="fact", content="The office wifi password is on the fridge")
    b = remember(client, headers, type="fact", content="The office wifi password is on the fridge")
    post(client, f"/v1/memories/{b['id']}/pin", {}, headers)
    index_until_caught_up(runtime, tenant.id)
    found = _recall(client, headers, query="where is the wifi password", k=2)["items"]
    assert [i["id"] for i in found] == [b["id"], a["id"]]  # same text: the pin decides
    assert found[1]["rank"]["decided_by"] == "salience"
    # The pin is reported as such, and the score stays in [0, 1] (not in the billions).
    assert [i["rank"]["pinned"] for i in found] == [True, False]
    assert all(0 < i["salience"] < 1 and i["rank"]["salience"] == i["salience"] for i in found)
    assert found[0]["rank"]["similarity"] == found[1]["rank"]["similarity"]
    again = _recall(client, headers, query="where is the wifi password", k=2)["items"]
    # Each recall counted an access, so salience grew (decay aside: same instant).
    assert again[1]["salience"] > found[1]["salience"]


def test_filters_hold_inside_the_database_even_when_selective(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    for i in range(60):
        remember(client, headers, type="note", content=f"Note {i} about dark mode themes")
    wanted = [
        remember(client, headers, type="fact", project="apollo", content=f"Apollo fact {i}")["id"]
        for i in range(3)
    ]
    remember(client, other_tenant.headers(), type="fact", content="Dark mode everywhere")
    index_until_caught_up(runtime, tenant.id)
    index_until_caught_up(runtime, other_tenant.id)
    # Whatever matches: this is about filters, not the default floor (min_similarity 0).
    found = _recall(
        client,
        headers,
        query="dark mode themes",
        k=3,
        type="fact",
        project="apollo",
        min_similarity=0,
    )
    assert sorted(i["id"] for i in found["items"]) == sorted(wanted)
    unfiltered = _recall(client, headers, query="dark mode themes", k=10)
    assert len(unfiltered["items"]) == 10
    assert all(i["type"] == "note" for i in unfiltered["items"])
    theirs = _recall(client, other_tenant.headers(), query="dark mode", k=10)["items"]
    assert [i["content"] for i in theirs] == ["Dark mode everywhere"]
    scoped = _recall(client, headers, query="dark mode", k=5, scope="team")
    assert scoped["items"] == []


def test_pending_and_archived_memories_in_recall(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    kept = remember(client, headers, type="fact", content="The cat is called Miso")
    gone = remember(client, headers, type="fact", content="The cat's name is Miso")
    index_until_caught_up(runtime, tenant.id)
    post(client, f"/v1/memories/{gone['id']}/forget", {"reason": "duplicate"}, headers)
    post(
        client,
        f"/v1/memories/{kept['id']}/versions",
        {"content": "The cat is called Miso and is three years old"},
        headers,
    )
    drain_until_caught_up(runtime)  # published, but the new version is not embedded yet
    found = _recall(client, headers, query="what is the cat called", k=5)
    assert [(i["id"], i["status"]) for i in found["items"]] == [(kept["id"], "pending")]
    assert "content" not in found["items"][0]
    # Both memories' revisions moved (a new version; a forget), so both are due for
    # the indexing drain; only the new version needs embedding.
    assert client.get("/v1/revision", headers=headers).json()["unindexed_memories"] == 2
    archived = _recall(client, headers, query="what is the cat called", k=5, include_archived=True)
    flagged = {i["id"]: i for i in archived["items"]}[gone["id"]]
    assert flagged["belief"]["labels"]["archived"]["reason"] == "duplicate"
    assert index_until_caught_up(runtime, tenant.id) == 1
    assert client.get("/v1/revision", headers=headers).json()["unindexed_memories"] == 0
    now = _recall(client, headers, query="how old is the cat", k=1)["items"][0]
    assert now["status"] == "current" and "three years old" in now["content"]


def test_an_opposite_preference_is_a_potential_contradiction_and_nothing_is_written(
    runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()

    def drains() -> None:  # the in-process drain, run inline after each write
        index_until_caught_up(runtime, tenant.id)

    with TestClient(create_app(ApiSettings(), runtime, wake=drains)) as client:
        dark = remember(client, headers, type="preference", content="I prefer dark mode")
        assert dark["potential_contradictions"] == {
            "status": "ready",
            "floor": runtime.embedding.conflict_floor,
            "items": [],
        }
        before = snapshot()
        light = remember(client, headers, type="preference", content="I switched to light mode")
        after = snapshot()
        [candidate] = light["potential_contradictions"]["items"]
        assert candidate["memory_id"] == dark["id"]
        assert runtime.embedding.conflict_floor <= candidate["similarity"] < 0.9
        # Advisory: the write recorded the memory and its embedding, and no edge,
        # label, decision or proposal came of the candidate.
        grown = {t for t in after if after[t] != before[t]}
        assert "memory_links" not in grown and "decision_index" not in grown
        belief = client.get(f"/v1/memories/{dark['id']}", headers=headers).json()["belief"]
        assert belief["alternatives"] == [] and belief["labels"]["superseded_by"] == []
        later = client.get(f"/v1/memories/{light['id']}/candidates", headers=headers).json()
        assert later == light["potential_contradictions"]
        # A note or an event is never paired, however similar.
        note = remember(client, headers, type="note", content="I prefer dark mode")
        assert note["potential_contradictions"]["items"] == []
        assert "never paired" in note["potential_contradictions"]["reason"]
        # Another scope or project is another world.
        other = remember(
            client, headers, type="preference", scope="team", content="I prefer light mode"
        )
        assert other["potential_contradictions"]["items"] == []


def test_without_a_drain_the_candidates_come_later(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    remember(client, headers, type="decision", content="We use PostgreSQL for the event store")
    index_until_caught_up(runtime, tenant.id)
    moved = remember(client, headers, type="decision", content="We moved the event store to SQLite")
    assert moved["potential_contradictions"]["status"] == "pending"
    url = moved["potential_contradictions"]["url"]
    assert client.get(url, headers=headers).json()["status"] == "pending"
    index_until_caught_up(runtime, tenant.id)
    ready = client.get(url, headers=headers).json()
    assert ready["status"] == "ready" and len(ready["items"]) == 1


@pytest.mark.parametrize("paired", ["event", "note"])
def test_candidate_pairs_follow_the_rules(
    client: TestClient, tenant: Tenant, runtime: Runtime, paired: str
) -> None:
    headers = tenant.headers()
    older = remember(client, headers, type="preference", content="I prefer dark mode")
    newer = remember(client, headers, type="preference", content="I prefer light mode now")
    remember(client, headers, type="preference", project="x", content="I prefer light mode")
    remember(client, headers, type=paired, content="I prefer dark mode")
    remember(client, headers, type=paired, content="I prefer dark mode")
    index_until_caught_up(runtime, tenant.id)
    pairs = candidate_pairs(runtime.log, tenant.id, floor=runtime.embedding.conflict_floor)
    assert [(str(p.newer), str(p.older)) for p in pairs] == [(newer["id"], older["id"])]
    post(
        client,
        f"/v1/memories/{newer['id']}/edges",
        {"kind": "supersedes", "target_id": older["id"]},
        headers,
    )
    index_until_caught_up(runtime, tenant.id)
    assert candidate_pairs(runtime.log, tenant.id, floor=runtime.embedding.conflict_floor) == []


def test_an_observation_is_indexed_once_every_memory_citing_it_is_embedded(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = post(client, "/v1/observations", {"content": "I moved to Lisbon."}, headers).json()
    evidence = [{"observation_id": obs["id"], "start": 2, "end": 17}]
    remember(client, headers, type="fact", content="Lives in Lisbon", evidence=evidence)
    drain_until_caught_up(runtime)
    milestones = client.get(f"/v1/observations/{obs['id']}", headers=headers).json()
    assert milestones["milestones"]["published"] is not None
    assert milestones["milestones"]["indexed"] is None
    index_until_caught_up(runtime, tenant.id)
    indexed = client.get(f"/v1/observations/{obs['id']}", headers=headers).json()["milestones"]
    assert indexed["indexed"]["at"] >= indexed["published"]["at"]
    remember(client, headers, type="fact", content="Moved in 2026", evidence=evidence)
    drain_until_caught_up(runtime)
    again = client.get(f"/v1/observations/{obs['id']}", headers=headers).json()["milestones"]
    assert again["indexed"] is None  # a newer citing memory is not embedded yet


def test_bad_recall_requests_are_refused_and_change_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers("reader")
    before = snapshot()
    for body, status in (
        ({"query": ""}, 422),
        ({"query": "x", "k": 0}, 422),
        ({"query": "x", "k": 101}, 422),
        ({"query": "x", "type": "feeling"}, 422),
        ({"query": "x", "surprise": True}, 422),
        ({}, 422),
    ):
        response = client.post("/v1/recall", json=body, headers=headers)
        assert response.status_code == status, (body, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    assert client.post("/v1/recall", json={"query": "x"}).status_code == 401
    assert snapshot() == before
    # A reader may recall (and a recall of nothing stamps nothing).
    assert _recall(client, headers, query="anything at all")["items"] == []
    assert snapshot() == before


def test_the_index_path_and_its_exact_fallback(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tests' tenants are small, so recall searches them exactly; make "small" smaller.
    monkeypatch.setattr("palimpsest.projections.recall.search.EXACT_BELOW", 5)
    headers = tenant.headers()
    for i in range(30):
        remember(client, headers, type="note", content=f"Note {i}: the standup moved again")
    wanted = [
        remember(client, headers, type="fact", project="apollo", content=f"Apollo launch {i}")["id"]
        for i in range(3)
    ]
    index_until_caught_up(runtime, tenant.id)
    walked = _recall(client, headers, query="when is the standup", k=10)
    assert walked["strategy"] == "hnsw" and len(walked["items"]) == 10
    assert all(i["type"] == "note" for i in walked["items"])
    # The walk finds too few facts of apollo among its candidates: exact search.
    short = _recall(
        client,
        headers,
        query="when is the standup",
        k=5,
        type="fact",
        project="apollo",
        min_similarity=0,  # every fact of apollo, however unrelated
    )
    assert short["strategy"] == "exact"
    assert sorted(i["id"] for i in short["items"]) == sorted(wanted)


def _launch_facts_among_notes(client: TestClient, tenant: Tenant, runtime: Runtime) -> list[str]:
    """Twelve facts of a launch window among thirty notes, indexed; the facts' ids."""
    headers = tenant.headers()
    facts = [
        remember(client, headers, type="fact", content=f"Apollo launch window {i}")["id"]
        for i in range(12)
    ]
    for i in range(30):
        remember(client, headers, type="note", content=f"Note {i}: the launch moved again")
    index_until_caught_up(runtime, tenant.id)
    return facts


def _erase(client: TestClient, tenant: Tenant, runtime: Runtime, ids: list[str]) -> None:
    erased = post(
        client,
        "/v1/erasures",
        {"memory_ids": ids, "reason": "the user asked"},
        tenant.headers("admin"),
    )
    assert erased.status_code == 201, erased.text
    index_until_caught_up(runtime, tenant.id)


def test_a_selection_erased_below_the_index_path_still_answers_every_memory_left(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The index path finds the selection large; an erasure shrinks it, and what is left
    # is found whole (the exact search takes over when the index leaves it short).
    monkeypatch.setattr("palimpsest.projections.recall.search.EXACT_BELOW", 5)
    headers = tenant.headers()
    facts = _launch_facts_among_notes(client, tenant, runtime)
    query = {"query": "apollo launch", "k": 5, "type": "fact", "min_similarity": 0}
    assert _recall(client, headers, **query)["strategy"] == "hnsw"
    _erase(client, tenant, runtime, facts[2:])
    left = _recall(client, headers, **query)
    assert sorted(i["id"] for i in left["items"]) == sorted(facts[:2])
    assert left["strategy"] == "exact"


def test_a_selection_counted_large_is_walked_for_a_while_then_counted_again(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Counting the selection is a round trip of every recall; a large count is taken
    # as still large for a few seconds, and what a shrunken selection holds is found.
    monkeypatch.setattr("palimpsest.projections.recall.search.EXACT_BELOW", 5)
    now = [0.0]
    selections = LargeSelections(seconds=10.0, clock=lambda: now[0])
    monkeypatch.setattr("palimpsest.projections.recall.search._LARGE_SELECTIONS", selections)
    headers = tenant.headers()
    facts = _launch_facts_among_notes(client, tenant, runtime)
    query = {"query": "apollo launch window", "k": 2, "type": "fact", "min_similarity": 0}
    assert _recall(client, headers, **query)["strategy"] == "hnsw"
    _erase(client, tenant, runtime, facts[4:])
    # Four facts are left, fewer than "large": within the ten seconds, not counted.
    now[0] = 9.9
    walked = _recall(client, headers, **query)
    assert walked["strategy"] == "hnsw"
    assert len(walked["items"]) == 2 and {i["id"] for i in walked["items"]} <= set(facts[:4])
    # Past them, counted again: small, searched exactly.
    now[0] = 10.0
    counted = _recall(client, headers, **query)
    assert counted["strategy"] == "exact"
    assert [i["id"] for i in counted["items"]] == [i["id"] for i in walked["items"]]


def test_candidates_of_unknown_or_malformed_memories_are_refused(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers("reader")
    missing = client.get(f"/v1/memories/{uuid.uuid4()}/candidates", headers=headers)
    assert missing.status_code == 404 and problem_slug(missing) == "not-found"
    malformed = client.get("/v1/memories/nope/candidates", headers=headers)
    assert malformed.status_code == 422
    assert client.get(f"/v1/memories/{uuid.uuid4()}/candidates").status_code == 401


def test_recall_filters_by_topic_and_shows_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    for i in range(5):
        remember(client, headers, type="note", topic="ui", content=f"Dark mode note {i}")
    wanted = remember(client, headers, type="note", topic="billing", content="Invoices are dark")
    index_until_caught_up(runtime, tenant.id)
    found = _recall(client, headers, query="dark mode", k=3, topic="billing")["items"]
    assert [(i["id"], i["topic"], i["content"]) for i in found] == [
        (wanted["id"], "billing", "Invoices are dark")
    ]
    ui = _recall(client, headers, query="dark mode", k=10, topic="ui")["items"]
    assert len(ui) == 5 and {i["topic"] for i in ui} == {"ui"}
    assert _recall(client, headers, query="dark mode", k=3, topic="nothing")["items"] == []


@pytest.mark.parametrize("mode", ["hybrid", "vector", "text"])
@pytest.mark.parametrize("exact_below", [2000, 0])
def test_project_under_selects_a_project_and_those_below_it(
    client: TestClient,
    tenant: Tenant,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    exact_below: int,
) -> None:
    # Both vector paths: exact from the start (a small tenant), and the index first.
    monkeypatch.setattr("palimpsest.projections.recall.search.EXACT_BELOW", exact_below)
    headers = tenant.headers()
    projects = ["a", "a/b", "a/b/c", "ab", "a-b", "a.b", "b/a", None]
    ids = {
        p: remember(client, headers, type="note", project=p, content="Release notes for deploy")[
            "id"
        ]
        for p in projects
    }
    index_until_caught_up(runtime, tenant.id)

    def under(project: str) -> set[str]:
        body = {"query": "deploy release notes", "k": 10, "mode": mode, "min_similarity": 0}
        found = _recall(client, headers, project_under=project, **body)["items"]
        return {i["id"] for i in found}

    assert under("a") == {ids["a"], ids["a/b"], ids["a/b/c"]}
    assert under("a/b") == {ids["a/b"], ids["a/b/c"]}
    assert under("b") == {ids["b/a"]}
    assert under("a/") == set()
    for bad in ("", "x\u0000"):
        response = post(client, "/v1/recall", {"query": "x", "project_under": bad}, headers)
        assert response.status_code == 422 and problem_slug(response) == "validation-error"
