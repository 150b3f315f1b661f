"""Until a conflict is settled, recall says so and ranks by time (issue 44, item 2).

Agents ``remember`` a changed preference far more often than they revise the old
one: the older memory then comes back beside the newer, marked
``possibly_superseded_by`` the newer one and ranked below it, until the caller
settles the pair (``POST /v1/memories/{id}/candidates/{other_id}/settle``).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

_QUESTION = "Which colour theme does the user prefer?"


def _recall(client: TestClient, headers: dict[str, str], **body: Any) -> list[dict[str, Any]]:
    response = post(client, "/v1/recall", {"query": _QUESTION, **body}, headers)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _dark_then_light(
    client: TestClient, headers: dict[str, str], runtime: Runtime, tenant: Tenant
) -> tuple[str, str]:
    """Day 1 the agent remembers dark mode; day 3 light mode, as a new memory."""
    dark = remember(client, headers, type="preference", content="The user prefers dark mode")
    light = remember(client, headers, type="preference", content="The user now prefers light mode")
    index_until_caught_up(runtime, tenant.id)
    return dark["id"], light["id"]


def test_the_newer_preference_comes_first_and_the_older_is_marked(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    for mode in ("hybrid", "vector"):
        found = _recall(client, headers, mode=mode)
        assert [i["id"] for i in found] == [light, dark], (mode, found)
        newer, older = found
        assert older["possibly_superseded_by"] == [light] and newer["possibly_superseded_by"] == []
        # By meaning alone the stale one would be first (0.46 against 0.34).
        assert older["similarity"] > newer["similarity"]
        assert older["rank"]["decided_by"] == "possibly_superseded"
        assert older["status"] == newer["status"] == "current"
    # Not a label: the older memory is not archived, and reads of it say nothing new.
    belief = client.get(f"/v1/memories/{dark}", headers=headers).json()["belief"]
    assert belief["labels"]["archived"] is None


def test_words_that_name_the_older_memory_keep_it_first_and_marked(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    # Every word of "dark mode" is in the older memory, not in the newer: the query is
    # about it (as "PAL-123" is about that ticket, not the one written after it).
    found = _recall(client, headers, query="dark mode", mode="text")
    assert [i["id"] for i in found] == [dark, light]
    assert found[0]["possibly_superseded_by"] == [light] and found[0]["text_match"] == "all"
    # Words both hold leave time to decide.
    both = _recall(client, headers, query="user prefers mode", mode="text")
    assert [i["id"] for i in both] == [light, dark]


def test_a_settled_pair_follows_its_settlement(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    # Supersedes: the older one is archived, so only the newer comes back.
    headers = tenant.headers()
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    settled = post(
        client,
        f"/v1/memories/{light}/candidates/{dark}/settle",
        {"resolution": "supersedes", "reason": "the user switched"},
        headers,
    )
    assert settled.status_code == 201, settled.text
    index_until_caught_up(runtime, tenant.id)
    assert [i["id"] for i in _recall(client, headers)] == [light]
    flagged = _recall(client, headers, include_archived=True)
    assert {i["id"] for i in flagged} == {dark, light}
    # Both stand: neither is marked, and meaning alone orders them again.
    theirs = other_tenant.headers()
    dark, light = _dark_then_light(client, theirs, runtime, other_tenant)
    stood = post(
        client,
        f"/v1/memories/{light}/candidates/{dark}/settle",
        {"resolution": "both_stand", "reason": "one for the editor, one for the docs"},
        theirs,
    )
    assert stood.status_code == 201, stood.text
    found = _recall(client, theirs)
    assert {i["id"] for i in found} == {dark, light}
    assert all(i["possibly_superseded_by"] == [] for i in found)
    assert found[1]["rank"]["decided_by"] == "fused"
    assert found[0]["rank"]["fused"] >= found[1]["rank"]["fused"]


def test_only_similar_memories_of_one_kind_are_marked(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    # Notes are never paired; another scope is another world; an unrelated preference
    # of the same scope is not similar enough.
    remember(client, headers, type="note", content="The user prefers dark mode")
    remember(client, headers, type="note", content="The user now prefers light mode")
    remember(client, headers, type="preference", scope="team", content="Prefers dark mode")
    remember(client, headers, type="preference", scope="team", content="Now likes green tea")
    index_until_caught_up(runtime, tenant.id)
    found = _recall(client, headers, min_similarity=0)
    assert len(found) == 4 and all(i["possibly_superseded_by"] == [] for i in found)


def test_the_configured_conflict_floor_decides_what_recall_marks(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator who raised PALIMPSEST_CONFLICT_FLOOR above the pair's similarity
    # is told no pair exists at write time; recall must not mark it either.
    monkeypatch.setenv("PALIMPSEST_CONFLICT_FLOOR", "0.99")
    headers = tenant.headers()
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    found = _recall(client, headers, mode="vector")
    assert {i["id"] for i in found} == {dark, light}
    assert all(i["possibly_superseded_by"] == [] for i in found)


def test_a_question_the_older_answers_in_full_still_gets_the_newer_first(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given "dark" said in many of the tenant's memories, so that it weighs little
    headers = tenant.headers()
    for place in ("room", "roast", "chocolate", "sky", "alley", "cellar", "forest", "hall"):
        remember(client, headers, type="note", content=f"The dark {place} at the venue")
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    # When the question holds every word of the older preference, and the newer one
    # lacks only that common word
    found = _recall(client, headers, query="user prefers dark mode", mode="text")
    ids = [i["id"] for i in found]
    # Then the newer comes first: the words it lacks do not name the older one (as
    # "PAL-123" would), the question is about the same preference
    assert ids.index(light) < ids.index(dark)
    assert found[ids.index(dark)]["possibly_superseded_by"] == [light]
    assert found[ids.index(dark)]["rank"]["decided_by"] == "possibly_superseded"


def test_what_may_replace_a_recalled_memory_comes_back_with_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given dark mode, then light mode, marked as a possible replacement of it
    headers = tenant.headers()
    dark, light = _dark_then_light(client, headers, runtime, tenant)
    # When the query matches the older one by meaning (0.35 similar) and the newer one
    # too little for the default floor on its own (0.16)
    found = _recall(client, headers, query="black", mode="hybrid")
    by_id = {i["id"]: i for i in found}
    assert by_id[dark]["possibly_superseded_by"] == [light]
    # Then the newer one comes back too: a reader shown the older one is shown what may
    # have replaced it
    assert light in by_id and by_id[light]["similarity"] < 0.25
    assert [i["id"] for i in found] == [light, dark]
