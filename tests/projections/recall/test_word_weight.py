"""Hybrid recall's words weigh by rarity (BM25), computed in SQL as from the documents.

The text search of hybrid recall ranks its candidates by ``word_weight``: each lexeme
of the query a memory holds weighs its rarity in the tenant (BM25's inverse document
frequency, from ``lexeme_counts``) times a saturating count of its positions, over
the weight of every lexeme of the query held once. The statement reads only the
``memory_lexemes`` rows; this holds it equal to BM25 computed in Python from the
documents themselves (their ``tsvector``) and the tenant's counts, for generated
documents and queries, common words (which select nothing but still weigh) included.
Each example is written by the indexing drain's own writer into real PostgreSQL and
rolled back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from palimpsest.projections.recall._statements import search_statement
from palimpsest.projections.recall._words import BM25_K1, COMMON_FLOOR
from palimpsest.projections.recall.indexing import _write_texts
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import TEXT_SEARCH_CONFIG
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.statement import shaped_sql
from tests.conftest import Tenant
from tests.projections.recall.drain_rows import drain_rows, written_texts

_COMMON = "ubiquitous"
_WORDS = [_COMMON, "release", "releases", "train", "Friday", "the", "PAL-123", "25:50"]
_WORDS += ["Lisbon", "Caroline", "research", "adoption", "pottery", "dark", "mode"]


@pytest.fixture(scope="module")
def crowded(runtime: Runtime) -> Iterator[Tenant]:
    """A tenant of COMMON_FLOOR + 100 memories holding the common word, and a few
    holding "caroline" (a word of middling rarity)."""
    from palimpsest.projections.commands.tokens import create_tenant

    tenant = Tenant(runtime, create_tenant(runtime.log, f"weights-{uuid4().hex[:8]}"))
    ids = [uuid4() for _ in range(COMMON_FLOOR + 100)]
    texts = {
        memory_id: f"{_COMMON} filler {i}" + (" Caroline" if i % 50 == 0 else "")
        for i, memory_id in enumerate(ids)
    }
    with tenant_transaction(runtime.log.datastore, tenant.id, commit=True) as cur:
        _write_texts(cur, runtime.database.schema, drain_rows(ids), texts)
    yield tenant


def _weights(cur: Any, runtime: Runtime, words: str) -> dict[UUID, float]:
    """Hybrid's text search: its candidates of ``words`` and their word weights."""
    query = shaped_sql(
        search_statement, runtime.database.schema, None, False, (), False, True, False, True
    )
    cur.execute(query, {"words": words, "limit": 2000})
    return {row["memory_id"]: row["word_weight"] for row in cur.fetchall()}


def _bm25(cur: Any, runtime: Runtime, words: str, ids: list[UUID]) -> dict[UUID, float]:
    """BM25 (no length normalisation) of each memory of ``ids``, from its document."""
    schema = sql.Identifier(runtime.database.schema)
    cur.execute(
        "SELECT tsvector_to_array(to_tsvector(%s::regconfig, %s)) AS lexemes",
        (TEXT_SEARCH_CONFIG, words),
    )
    lexemes = list(cur.fetchone()["lexemes"])
    cur.execute(sql.SQL("SELECT lexeme, memories FROM {s}.lexeme_counts").format(s=schema))
    counts = {row["lexeme"]: row["memories"] for row in cur.fetchall()}
    documents = counts[""]

    def rarity(lexeme: str) -> float:
        held = counts.get(lexeme, 0)
        return math.log(1 + (documents - held + 0.5) / (held + 0.5))

    ideal = sum(rarity(lexeme) for lexeme in lexemes)
    cur.execute(
        sql.SQL(
            "SELECT t.memory_id, d.lexeme, cardinality(d.positions) AS n"
            " FROM {s}.memory_texts t, unnest(t.document) AS d WHERE t.memory_id = ANY(%s)"
        ).format(s=schema),
        (ids,),
    )
    weights: Counter[UUID] = Counter()
    for row in cur.fetchall():
        if row["lexeme"] in lexemes:
            n = row["n"]
            weights[row["memory_id"]] += rarity(row["lexeme"]) * n * (BM25_K1 + 1) / (n + BM25_K1)
    return {memory_id: weights[memory_id] / ideal for memory_id in ids}


def _words(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(_WORDS), min_size=min_size, max_size=max_size).map(" ".join)


def test_the_word_weight_from_the_lexeme_rows_is_bm25_from_the_documents(
    runtime: Runtime, crowded: Tenant
) -> None:
    reached: Counter[str] = Counter()

    @settings(
        max_examples=100,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(documents=st.lists(_words(1, 30), min_size=1, max_size=6), words=_words(1, 5))
    def check(documents: list[str], words: str) -> None:
        with written_texts(runtime, crowded.id, documents) as (cur, ids):
            found = {m: w for m, w in _weights(cur, runtime, words).items() if m in ids}
            expected = _bm25(cur, runtime, words, list(found))
        assert found.keys() == expected.keys()
        for memory_id, weight in found.items():
            assert weight == pytest.approx(expected[memory_id], rel=1e-9), (documents, words)
            text = documents[ids.index(memory_id)].split()
            if _COMMON in words.split() and _COMMON in text:
                reached["a common word weighed"] += 1
            if len(text) != len(set(text)):
                reached["a repeated word"] += 1

    check()
    assert min(reached.values(), default=0) >= 10 and len(reached) == 2, reached


def test_a_rare_word_outweighs_a_common_one(runtime: Runtime, crowded: Tenant) -> None:
    # Given a memory holding the query's rare word and one holding its common word
    documents = ["pottery class", f"{_COMMON} class"]  # both selected by "class"
    with written_texts(runtime, crowded.id, documents) as (cur, (rare, common)):
        # When both are asked for
        found = _weights(cur, runtime, f"{_COMMON} pottery class")
    # Then the rare word's memory weighs more (ts_rank scored the two alike: two of
    # three words, once each)
    assert found[rare] > found[common] > 0
