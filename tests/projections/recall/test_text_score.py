"""Recall by words scores from its inverted rows exactly as from the documents.

The text search never reads a document: it scores each candidate from the
``memory_lexemes`` rows of its words (which it holds, and at how many positions).
Its score must equal what the documents give, ``ts_rank_cd`` against the query's
lexemes joined by ``|`` and "holds every lexeme" by containment, for any document
and any query: repeated words, stop words, hyphenated words, identifiers, numbers,
and words common enough (``COMMON_FLOOR``) to select nothing but still rank.
Each example is written by the indexing drain's own writer into real PostgreSQL
and rolled back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from palimpsest.projections.recall._statements import search_statement
from palimpsest.projections.recall._words import COMMON_FLOOR, EVERY_WORD, RANK_NORMALISATION
from palimpsest.projections.recall.indexing import _write_texts
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import TEXT_SEARCH_CONFIG
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.statement import shaped_sql
from tests.conftest import Tenant
from tests.projections.recall.drain_rows import drain_rows, written_texts

_COMMON = "ubiquitous"
"""Held by every filler memory: more than COMMON_FLOOR, so common in the tenant."""

_WORDS = [
    _COMMON,
    "release",
    "releases",
    "released",
    "train",
    "Friday",
    "the",
    "a",
    "and",
    "PAL-123",
    "PAL",
    "123",
    "25:50",
    "v2.5.1",
    "api.example.com",
    "well-known",
    "known",
    "cat",
    "cats",
    "dark",
    "mode",
    "Lisbon",
]


@pytest.fixture(scope="module")
def crowded(runtime: Runtime) -> Iterator[Tenant]:
    """A tenant of COMMON_FLOOR + 100 memories, each holding the common word and a
    number of its own (written by the indexing drain's writer, committed)."""
    from palimpsest.projections.commands.tokens import create_tenant

    tenant = Tenant(runtime, create_tenant(runtime.log, f"words-{uuid4().hex[:8]}"))
    ids = [uuid4() for _ in range(COMMON_FLOOR + 100)]
    texts = {memory_id: f"{_COMMON} filler {i}" for i, memory_id in enumerate(ids)}
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        _write_texts(cur, runtime.database.schema, drain_rows(ids), texts)
    yield tenant


def _search(cur: Any, runtime: Runtime, words: str) -> dict[UUID, float]:
    """The text search's candidates of ``words`` and their scores."""
    query = shaped_sql(search_statement, runtime.database.schema, None, False, (), False, True)
    cur.execute(query, {"words": words, "limit": 1000})
    return {row["memory_id"]: row["text_score"] for row in cur.fetchall()}


def _from_documents(cur: Any, runtime: Runtime, words: str, ids: list[UUID]) -> dict[UUID, float]:
    """The score of each memory of ``ids`` computed from its document."""
    cur.execute(
        sql.SQL(
            "WITH q AS (SELECT tsvector_to_array(to_tsvector(%(config)s::regconfig, %(words)s))"
            " AS lexemes)"
            " SELECT t.memory_id, CASE WHEN tsvector_to_array(t.document) @> q.lexemes"
            " THEN %(every)s::float8 ELSE 0.0 END"
            " + ts_rank_cd(t.document, (SELECT string_agg(quote_literal(l), ' | ')::tsquery"
            " FROM unnest(q.lexemes) AS l), %(normalisation)s)::float8 * %(every)s::float8"
            " AS score FROM {s}.memory_texts t, q WHERE t.memory_id = ANY(%(ids)s)"
        ).format(s=sql.Identifier(runtime.database.schema)),
        {
            "config": TEXT_SEARCH_CONFIG,
            "words": words,
            "every": EVERY_WORD,
            "normalisation": RANK_NORMALISATION,
            "ids": ids,
        },
    )
    return {row["memory_id"]: row["score"] for row in cur.fetchall()}


def _words(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Words of the vocabulary, led by the common word half the time (so that a
    common word ranks a memory it did not select in many examples, by design)."""
    return st.tuples(
        st.booleans(), st.lists(st.sampled_from(_WORDS), min_size=min_size, max_size=max_size)
    ).map(lambda led: " ".join(([_COMMON] if led[0] else []) + led[1]))


_text = _words(0, 40)
_query = _words(1, 5)


@pytest.mark.slow
def test_the_score_from_the_lexeme_rows_equals_the_score_from_the_documents(
    runtime: Runtime, crowded: Tenant
) -> None:
    reached: Counter[str] = Counter()

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(documents=st.lists(_text, min_size=1, max_size=6), words=_query)
    def check(documents: list[str], words: str) -> None:
        with written_texts(runtime, crowded.id, documents) as (cur, ids):
            found = {m: s for m, s in _search(cur, runtime, words).items() if m in ids}
            expected = _from_documents(cur, runtime, words, list(found))
        # Every candidate of the example scores exactly as its document does.
        assert found == expected, (documents, words)
        # Paths reached: candidates holding every word, some, repeated words, and a
        # common word that ranked a memory it did not select.
        for memory_id, score in found.items():
            text = documents[ids.index(memory_id)].split()
            reached["every word" if score >= EVERY_WORD else "some words"] += 1
            if len(text) != len(set(text)):
                reached["a repeated word"] += 1
            if _COMMON in words.split() and _COMMON in text and len(set(words.split())) > 1:
                reached["a common word ranked"] += 1

    check()
    assert min(reached[k] for k in ("every word", "some words", "a repeated word")) >= 10, reached
    assert reached["a common word ranked"] >= 20, reached
