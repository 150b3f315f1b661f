"""Recall admits when nothing matches (issue 44, item 4).

After the only plumber note was forgotten, ``recall "plumber"`` answered four
unrelated memories, each with a relevance of 0.66 to 0.83 for a similarity of
-0.05 to 0.19: fusion ranks places, and the first place scores high whatever it
holds. Now each item says how similar it is and whether its words matched, its
relevance is on that scale, and by default what matches neither is left out.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

_TEXTS = (
    "The user prefers dark mode in the code editor",
    "She drinks green tea every morning",
    "Production deploys happen on Friday afternoons",
    "The weekly sync with Alice moved to Tuesday",
)


def _recall(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    response = post(client, "/v1/recall", body, headers)
    assert response.status_code == 200, response.text
    return response.json()


def _store(client: TestClient, tenant: Tenant, runtime: Runtime) -> dict[str, str]:
    headers = tenant.headers()
    ids = {t: remember(client, headers, type="fact", content=t)["id"] for t in _TEXTS}
    index_until_caught_up(runtime, tenant.id)
    return ids


def test_a_query_about_nothing_stored_answers_nothing(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    plumber = remember(client, headers, type="note", content="Call Marco the plumber on Monday")
    _store(client, tenant, runtime)
    assert [i["id"] for i in _recall(client, headers, query="plumber")["items"]] == [plumber["id"]]
    forgot = post(client, f"/v1/memories/{plumber['id']}/forget", {"reason": "done"}, headers)
    assert forgot.status_code == 201
    index_until_caught_up(runtime, tenant.id)
    for mode in ("hybrid", "vector", "text"):
        assert _recall(client, headers, query="plumber", mode=mode)["items"] == [], mode
    # Asked for, the least unrelated come back, saying how little they match.
    everything = _recall(client, headers, query="plumber", min_similarity=0)["items"]
    assert len(everything) == 4
    for item in everything:
        assert item["text_match"] == "none" and item["similarity"] < 0.3
        assert item["rank"]["relevance"] == round(max(item["similarity"], 0.0), 3)
    # The fusion's score still orders them: meaning is the only list here, and its
    # first memory scores its share of the fused score (not its weak similarity).
    fused = [item["rank"]["fused"] for item in everything]
    assert fused == sorted(fused, reverse=True)
    assert fused[0] > everything[0]["rank"]["relevance"]


def test_a_paraphrase_and_a_word_match_are_kept(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    ids = _store(client, tenant, runtime)
    # By meaning: a paraphrase sharing no word with the memory that answers it.
    found = _recall(client, headers, query="When do we ship releases to prod?")["items"]
    assert [i["id"] for i in found] == [ids[_TEXTS[2]]]
    assert found[0]["text_match"] == "none" and found[0]["rank"]["relevance"] > 0.3
    # By words: half the query's words or more, however low the meaning (0.2 here).
    worded = _recall(client, headers, query="carburettor sync")["items"]
    assert [i["id"] for i in worded] == [ids[_TEXTS[3]]] and worded[0]["text_match"] == "some"
    assert worded[0]["similarity"] < 0.25
    # Vector mode knows no words: only meaning decides there.
    assert _recall(client, headers, query="carburettor sync", mode="vector")["items"] == []


def test_a_memory_holding_a_phrase_of_the_query_is_kept(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    """A long question names something in two words a memory says side by side: the
    memory holds 2 of its 10 words and is 0.25 similar, under every floor but the
    phrase's (LoCoMo's "Universal Studios" question was answered with nothing)."""
    headers = tenant.headers()
    _store(client, tenant, runtime)
    said = remember(
        client,
        headers,
        type="note",
        content="Loved the new spice rub recipe. Have you been to Universal Studios?"
        " A trip there is on for next month.",
    )
    scattered = remember(
        client,
        headers,
        type="note",
        content="The universal remote broke, so the recording studios sent another one.",
    )
    index_until_caught_up(runtime, tenant.id)
    question = (
        "Which US states might Tim be in during September based on his plans of"
        " visiting Universal Studios?"
    )
    # Neither matches by meaning: vector mode answers nothing.
    assert _recall(client, headers, query=question, mode="vector")["items"] == []
    found = _recall(client, headers, query=question)["items"]
    # The same two words apart are not the phrase.
    assert [i["id"] for i in found] == [said["id"]]
    assert found[0]["text_match"] == "some" and found[0]["similarity"] < 0.3
    assert scattered["id"] in {
        i["id"] for i in _recall(client, headers, query=question, mode="text")["items"]
    }
