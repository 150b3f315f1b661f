"""Recall by words as well as meanings: identifiers, modes, pages, and forgetting.

The text index is real PostgreSQL full-text search (``memory_texts``), kept by
the indexing drain; these tests write through the API, drain, and recall.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.drains._retention import apply_retention
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, index_until_caught_up

_TEXTS = {
    "ticket": "Ticket PAL-123 blocks the release until the migration is fixed",
    "other_ticket": "Ticket PAL-124 is a cosmetic issue in the settings page",
    "time": "My personal best in the charity 5K is now 25:50",
    "old_time": "My first charity 5K took 31:40, slow but fun",
    "tea": "She drinks green tea every morning before work",
    "deploy": "Production deploys happen on Friday afternoons",
}


def _recall(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    response = post(client, "/v1/recall", body, headers)
    assert response.status_code == 200, response.text
    return response.json()


def _ids(found: Any) -> list[str]:
    return [item["id"] for item in found["items"]]


def _lexemes(runtime: Runtime, tenant: Tenant, memory_id: str) -> list[str]:
    """The memory's rows of the inverted text index, as its tenant sees them."""
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=False) as cur:
        cur.execute(
            sql.SQL(
                "SELECT lexeme FROM {s}.memory_lexemes WHERE memory_id = %s ORDER BY lexeme"
            ).format(s=sql.Identifier(runtime.database.schema)),
            (memory_id,),
        )
        return [row["lexeme"] for row in cur.fetchall()]


@pytest.fixture
def memories(client: TestClient, tenant: Tenant, runtime: Runtime) -> dict[str, str]:
    headers = tenant.headers()
    ids = {k: remember(client, headers, type="fact", content=t)["id"] for k, t in _TEXTS.items()}
    index_until_caught_up(runtime, tenant.id)
    return ids


def test_identifiers_are_found_by_words_in_every_mode_but_vector(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, memories: dict[str, str]
) -> None:
    headers = tenant.headers()
    # Another tenant's identical identifier is never a candidate.
    remember(client, other_tenant.headers(), type="fact", content="PAL-123 is theirs")
    for query, expected in (("PAL-123", "ticket"), ("25:50", "time"), ("ticket PAL-124", None)):
        wanted = memories[expected or "other_ticket"]
        text = _recall(client, headers, query=query, k=3, mode="text")
        assert text["mode"] == "text" and text["strategy"] == "text"
        assert text["items"][0]["id"] == wanted, (query, text)
        first = text["items"][0]
        assert first["rank"]["text_rank"] == 1 and first["rank"]["text_score"] > 0
        assert first["rank"]["vector_rank"] is None and first["similarity"] is None
        assert (
            first["rank"]["mode"] == "text"
            and first["content"] == _TEXTS[expected or "other_ticket"]
        )
        hybrid = _recall(client, headers, query=query, k=3)
        assert hybrid["mode"] == "hybrid" and hybrid["items"][0]["id"] == wanted, (query, hybrid)
        why = hybrid["items"][0]["rank"]
        assert why["text_rank"] == 1 and why["vector_rank"] is not None
        assert 0 < why["relevance"] <= 1 and why["similarity"] is not None
    # Words only match words: nothing of the tenant says "zeppelin".
    assert _recall(client, headers, query="zeppelin", mode="text")["items"] == []


def test_vector_mode_ranks_by_meaning_alone(
    client: TestClient, tenant: Tenant, memories: dict[str, str]
) -> None:
    found = _recall(
        client,
        tenant.headers(),
        query="What does she drink in the morning?",
        k=2,
        mode="vector",
        min_similarity=0,  # the second is unrelated: kept to show what ranks it
    )
    first = found["items"][0]
    assert first["id"] == memories["tea"] and found["strategy"] in ("hnsw", "exact")
    assert first["rank"]["text_rank"] is None and first["rank"]["vector_rank"] == 1
    assert first["rank"]["relevance"] == first["rank"]["similarity"]
    assert found["items"][1]["rank"]["decided_by"] == "similarity"


def test_min_similarity_and_topic_filter_every_mode(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    tagged = remember(client, headers, type="fact", topic="running", content="Ran the 5K in 25:50")[
        "id"
    ]
    remember(client, headers, type="fact", content="Cooked the 25:50 recipe in 25 minutes")
    index_until_caught_up(runtime, tenant.id)
    for mode in ("hybrid", "vector", "text"):
        found = _recall(client, headers, query="25:50", mode=mode, topic="running")
        assert _ids(found) == [tagged], mode
        assert found["items"][0]["topic"] == "running"
    everything = _recall(client, headers, query="25:50 running time", mode="hybrid")
    assert len(everything["items"]) == 2
    similar = _recall(client, headers, query="How fast did I run the 5K?", min_similarity=0.3)
    assert _ids(similar) == [tagged]
    assert all(i["similarity"] >= 0.3 for i in similar["items"])
    assert _recall(client, headers, query="25:50", min_similarity=1.0)["items"] == []
    # In text mode the floor holds too (the query is embedded for it).
    words = _recall(client, headers, query="25:50", mode="text")
    assert len(words["items"]) == 2 and all(i["similarity"] is None for i in words["items"])
    query = "How fast did I run the 5K? 25:50"
    by_meaning = _recall(client, headers, query=query, mode="vector")["items"]
    best, second = (i["similarity"] for i in by_meaning)
    floor = round((best + second) / 2, 3)
    floored = _recall(client, headers, query=query, mode="text", min_similarity=floor)
    assert _ids(floored) == [by_meaning[0]["id"]] and floored["items"][0]["similarity"] >= floor


def test_a_cursor_pages_through_the_same_ranking(
    client: TestClient, tenant: Tenant, memories: dict[str, str]
) -> None:
    headers = tenant.headers()
    query = {"query": "charity 5K ticket release time", "mode": "hybrid", "min_similarity": 0}
    whole = _ids(_recall(client, headers, **query, k=6))
    pages: list[str] = []
    cursor = None
    for _ in range(3):
        page = _recall(client, headers, **query, k=2, **({"cursor": cursor} if cursor else {}))
        assert len(page["items"]) == 2
        pages += _ids(page)
        cursor = page["next_cursor"]
        assert cursor is not None
    # Each page stamps accesses, which can reorder equal relevance only: the pages
    # hold every memory of the first six once.
    assert sorted(pages) == sorted(whole) and len(set(pages)) == 6
    assert _recall(client, headers, **query, k=2, cursor=cursor)["items"] == []


@pytest.mark.parametrize(
    ("body", "slug"),
    [
        ({"mode": "fuzzy"}, "validation-error"),
        ({"min_similarity": 1.5}, "validation-error"),
        ({"min_similarity": -0.1}, "validation-error"),
        ({"min_similarity": "0.5"}, "validation-error"),
        ({"cursor": "not-a-cursor"}, "invalid-input"),
        ({"cursor": "bm90IGJhc2U2NA"}, "invalid-input"),
    ],
)
def test_bad_recall_input_is_a_problem(
    client: TestClient, tenant: Tenant, body: dict[str, Any], slug: str
) -> None:
    response = post(client, "/v1/recall", {"query": "PAL-123", **body}, tenant.headers())
    assert response.status_code in (400, 422) and problem_slug(response) == slug


def test_a_cursor_of_another_recall_or_too_deep_is_refused(
    client: TestClient, tenant: Tenant, memories: dict[str, str]
) -> None:
    headers = tenant.headers()
    cursor = _recall(client, headers, query="ticket", k=1)["next_cursor"]
    assert cursor is not None
    foreign = post(client, "/v1/recall", {"query": "tea", "k": 1, "cursor": cursor}, headers)
    assert problem_slug(foreign) == "invalid-input"
    other_mode = post(
        client, "/v1/recall", {"query": "ticket", "mode": "text", "cursor": cursor}, headers
    )
    assert problem_slug(other_mode) == "invalid-input"
    same = post(client, "/v1/recall", {"query": "ticket", "k": 100, "cursor": cursor}, headers)
    assert same.status_code == 200


def test_erased_words_are_not_found(
    client: TestClient, tenant: Tenant, runtime: Runtime, memories: dict[str, str]
) -> None:
    headers = tenant.headers()
    assert _ids(_recall(client, headers, query="PAL-123", mode="text"))[0] == memories["ticket"]
    # The drain wrote the inverted lexemes the text search reads (stemmed, no stop words).
    assert _lexemes(runtime, tenant, memories["ticket"]) == [
        "-123",
        "block",
        "fix",
        "migrat",
        "pal",
        "releas",
        "ticket",
    ]
    erased = post(
        client,
        "/v1/erasures",
        {"reason": "the user asked", "memory_ids": [memories["ticket"]]},
        headers,
    )
    assert erased.status_code in (200, 201), erased.text
    # In the erasing transaction: no drain has run, and the words are gone.
    for mode in ("text", "hybrid"):
        found = _recall(client, headers, query="PAL-123 blocks the release", mode=mode)
        assert memories["ticket"] not in _ids(found), mode
    assert _lexemes(runtime, tenant, memories["ticket"]) == []
    assert _lexemes(runtime, tenant, memories["other_ticket"]) != []


def test_expired_observation_words_are_not_found_and_memory_words_outlive_them(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    source = observe(client, headers, "Call me about ZX-9041 tomorrow. I prefer oolong tea.")
    memory = remember(
        client,
        headers,
        type="preference",
        content="Prefers oolong tea",
        evidence=[{"observation_id": source, "start": 32, "end": 51}],
    )["id"]
    index_until_caught_up(runtime, tenant.id)
    client.put("/v1/tenant/retention", json={"raw_hours": 24}, headers=headers)
    later = datetime.now(UTC) + timedelta(days=3)
    while apply_retention(runtime.log, now=datetime.now(UTC)):
        pass
    while expire_due(runtime.log, now=later):
        pass
    assert client.get(f"/v1/observations/{source}/content", headers=headers).status_code == 410
    # The raw words are gone with the bytes and were never recall's; the memory's are.
    assert _recall(client, headers, query="ZX-9041", mode="text")["items"] == []
    assert _ids(_recall(client, headers, query="oolong", mode="text")) == [memory]


def test_a_new_version_replaces_the_words_recall_finds(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers, type="fact", content="Ticket PAL-777 blocks the release")
    index_until_caught_up(runtime, tenant.id)
    assert _ids(_recall(client, headers, query="PAL-777", mode="text")) == [memory["id"]]
    versioned = post(
        client, f"/v1/memories/{memory['id']}/versions", {"content": "The release shipped"}, headers
    )
    assert versioned.status_code in (200, 201), versioned.text
    index_until_caught_up(runtime, tenant.id)
    # The old version's lexemes went with it: its identifier finds nothing.
    assert _recall(client, headers, query="PAL-777", mode="text")["items"] == []
    assert _lexemes(runtime, tenant, memory["id"]) == ["releas", "ship"]
    assert _ids(_recall(client, headers, query="shipped", mode="text")) == [memory["id"]]


_CONVERSATION = [
    "Caroline: I've been reading studies and papers all month, so much to learn!",
    "Caroline: Science podcasts keep me curious every morning.",
    "Caroline: Lately I dig into scientific journals every evening.",
    "Caroline: I spent the weekend reading academic articles about psychology.",
    "Melanie: What have you been studying lately, Caroline?",
    "Caroline: I love learning new things, I spend hours in the library.",
    "Melanie: Caroline, you always find the most interesting articles.",
    "Caroline: The university library has such a great collection of journals.",
    "Caroline: Thanks Mel, the kids are great and work is busy.",
    "Melanie: Hey Caroline! Good to see you! How have you been?",
]


def test_a_question_whose_rare_word_one_turn_holds_is_answered_first_by_default(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a conversation where many turns are about reading and learning, and one
    # turn holds the question's rare word
    headers = tenant.headers()
    for turn in _CONVERSATION:
        remember(client, headers, type="note", content=turn)
    answer = remember(
        client, headers, type="note", content="Caroline: I researched adoption agencies last week."
    )["id"]
    index_until_caught_up(runtime, tenant.id)
    question = "What did Caroline research?"
    by_meaning = _ids(_recall(client, headers, query=question, mode="vector", k=11))
    # When it is asked with the default mode
    found = _recall(client, headers, query=question, k=5)
    # Then the turn holding its words comes first, though meaning alone puts other
    # turns above it (fixed weights that trusted meaning buried such answers)
    assert by_meaning.index(answer) >= 2
    assert _ids(found)[0] == answer
    assert found["items"][0]["rank"]["text_rank"] == 1


def _standups_and_a_parcel(client: TestClient, tenant: Tenant, runtime: Runtime) -> str:
    """More memories near :data:`_STANDUP_QUESTION`'s meaning than the vector search
    reads, and one far from it that holds its rare identifier (the parcel: its id)."""
    headers = tenant.headers()
    for n in range(30):
        remember(
            client,
            headers,
            type="note",
            content=f"The weekly standup meeting moved to {8 + n % 3}:{10 + n} in room {n}",
        )
    parcel = remember(
        client, headers, type="note", content="Parcel QX-7781 holds spare bicycle tyres"
    )["id"]
    index_until_caught_up(runtime, tenant.id)
    return str(parcel)


_STANDUP_QUESTION = "When is the standup meeting QX-7781?"


def _similarity(client: TestClient, tenant: Tenant, query: str, memory_id: str) -> float:
    """``memory_id``'s similarity to ``query`` as vector mode measures it."""
    found = _recall(client, tenant.headers(), query=query, mode="vector", k=40, min_similarity=0)
    return float(next(i["similarity"] for i in found["items"] if i["id"] == memory_id))


class _RightAway:
    """Runs what is submitted at once, in the caller's thread: a text search done
    before the vector search starts."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        done: Future[Any] = Future()
        done.set_result(fn(*args, **kwargs))
        return done


@pytest.mark.parametrize("words_done_first", [True, False])
def test_a_memory_found_by_words_alone_carries_its_similarity_in_hybrid_mode(
    client: TestClient,
    tenant: Tenant,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    words_done_first: bool,
) -> None:
    # Given more memories near the question's meaning than the vector search reads,
    # and one far from it that holds the question's rare identifier
    parcel = _standups_and_a_parcel(client, tenant, runtime)
    if words_done_first:  # its similarity read with the vector candidates' state
        monkeypatch.setattr("palimpsest.projections.recall.search._TEXT_SEARCHES", _RightAway())
    headers = tenant.headers()
    # When hybrid recall finds it by its words, not among the nearest by meaning (a
    # new query: its text search ran before the query was embedded)
    found = _recall(client, headers, query=_STANDUP_QUESTION, k=10, min_similarity=0)
    item = next(i for i in found["items"] if i["id"] == parcel)
    assert item["rank"]["text_rank"] is not None and item["rank"]["vector_rank"] is None
    # Then it reports the similarity vector mode measures for it, and a floor on
    # similarity keeps it or leaves it out by that similarity (the query remembered)
    similarity = _similarity(client, tenant, _STANDUP_QUESTION, parcel)
    assert item["similarity"] == pytest.approx(similarity, abs=1e-6)
    query = {"query": _STANDUP_QUESTION, "k": 10}
    below = _recall(client, headers, **query, min_similarity=similarity - 0.01)
    above = _recall(client, headers, **query, min_similarity=similarity + 0.01)
    assert parcel in _ids(below) and parcel not in _ids(above)


def test_a_slow_text_search_is_not_waited_for_inside_the_vector_search_transaction(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # A vector search's transaction waiting for its text search would hold a pooled
    # connection; with enough recalls at once every connection would be waiting.
    parcel = _standups_and_a_parcel(client, tenant, runtime)
    schema, app_user = runtime.database.schema, runtime.database.app_user
    query = RecallQuery(_STANDUP_QUESTION, 10, min_similarity=0)
    answers: list[Any] = []
    with runtime.database.owner_connection() as owner, owner.transaction():
        # Given the text search held up by a lock on the words' table
        owner.execute(
            sql.SQL("LOCK TABLE {}.memory_lexemes IN ACCESS EXCLUSIVE MODE").format(
                sql.Identifier(schema)
            )
        )
        recalling = threading.Thread(
            target=lambda: answers.append(
                recall(runtime.log, runtime.embedder, tenant.id, query, now=datetime.now(UTC))
            )
        )
        recalling.start()
        deadline = time.monotonic() + 10
        waiting: list[Any] = []
        while not waiting and time.monotonic() < deadline:
            # In a transaction the activity is one snapshot until it is cleared.
            owner.execute("SELECT pg_stat_clear_snapshot()")
            waiting = owner.execute(
                "SELECT 1 FROM pg_stat_activity WHERE usename = %s AND wait_event_type = 'Lock'",
                (app_user,),
            ).fetchall()
            time.sleep(0.02)
        assert waiting, "the text search never waited for the lock"
        time.sleep(1.0)  # the query embedded and the vector search ran meanwhile
        # Then no connection of the service sits in a transaction but the text search
        # (a pipelined one waits for its client as "active", not "idle in transaction")
        in_transaction: list[int] = []
        for _ in range(10):
            owner.execute("SELECT pg_stat_clear_snapshot()")
            counted = owner.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = %s"
                " AND xact_start IS NOT NULL AND wait_event_type IS DISTINCT FROM 'Lock'",
                (app_user,),
            ).fetchone()
            in_transaction.append(int(counted[0]) if counted else 0)
            time.sleep(0.02)
        assert min(in_transaction) == 0, in_transaction
        assert recalling.is_alive()
    recalling.join(timeout=30)
    # And once it ends, the memory it found by words carries its similarity
    item = next(i for i in answers[0].items if str(i.id) == parcel)
    assert item.rank.text_rank is not None and item.rank.vector_rank is None
    similarity = _similarity(client, tenant, _STANDUP_QUESTION, parcel)
    assert item.similarity == pytest.approx(similarity, abs=1e-6)
