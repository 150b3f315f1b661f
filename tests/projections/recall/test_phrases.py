"""A query's phrases: two of its words side by side, as the text index parsed them.

Hybrid recall keeps a memory holding one of them whatever share of the query's words
it holds (LoCoMo's "Which US states might Tim be in during September 2023 based on his
plans of visiting Universal Studios?" was answered with nothing: its answer held 2 of
its 11 words, "Universal Studios", and was 0.23 similar). The phrases are a ``tsquery``
built in SQL from the query's text, so any text a caller sends must build one (or
none) without an error, and a memory saying the query's own words must hold its
phrases.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from palimpsest.projections.recall._words import query_phrases
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import TEXT_SEARCH_CONFIG
from palimpsest.projections.store.sql import compile_query
from tests.conftest import owner_rows


def _phrases(runtime: Runtime, words: str, document: str | None = None) -> tuple[Any, Any]:
    """Return the phrases of ``words`` (as text, None when there are none) and whether
    ``document``, indexed as memories are, holds one of them."""
    phrases, _ = compile_query(select(query_phrases().label("p")))
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            f"SELECT p::text AS phrases, to_tsvector(%(config)s::regconfig, %(document)s) @@ p"
            f" AS held FROM ({phrases}) AS q",
            {"words": words, "document": document or "", "config": TEXT_SEARCH_CONFIG},
        ).fetchone()
    assert row is not None
    return row[0], row[1]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("visiting Universal Studios?", "'univers' <-> 'studio' | 'visit' <-> 'univers'"),
        # As the index reads it (the compound first), and as "Star Wars related".
        (
            "Star Wars-related locations",
            "'relat' <-> 'locat' | 'star' <-> 'war' | 'star' <-> 'wars-rel'"
            " | 'war' <-> 'relat' | 'wars-rel' <-> 'war'",
        ),
        # A stop word between two words parts them; one word has no phrase.
        ("Bank of America", None),
        ("plumber", None),
        ("", None),
        # Between a letter and a digit the hyphen stays, as the index keeps it.
        ("PAL-42 release", "'-42' <-> 'releas' | 'pal' <-> '-42'"),
    ],
)
def test_the_phrases_of_a_query(runtime: Runtime, words: str, expected: str | None) -> None:
    assert _phrases(runtime, words)[0] == expected


@pytest.mark.parametrize(
    ("document", "held"),
    [
        ("Have you been to Universal Studios? Planning a trip there.", True),
        ("The universal remote broke; the studios sent another.", False),
        ("Definitely Star Wars! It's my favourite.", True),
        ("A Star Wars-related tour of Ireland", False),  # its compound parts the words
    ],
)
def test_a_memory_holds_a_phrase_only_side_by_side(
    runtime: Runtime, document: str, held: bool
) -> None:
    query = "Which Star Wars locations, and did you visit Universal Studios?"
    assert _phrases(runtime, query, document)[1] is held


_PIECES = [
    *("a", "-", "'", "\\", " ", "é", "42", "x:y", "Star", "wars", "O'Neil"),
    *("c:\\dir\\f", "example.com/a'b/c", "/usr/a\\b", "x@y.com"),
]
"""Pieces of texts the parser splits, joins or keeps whole unlike words: a URL's path
keeps its quote in the lexeme, which must be quoted in the ``tsquery``."""

# The API refuses a NUL in any text and JSON carries no lone surrogate.
_TEXTS = st.text(
    st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=60
) | st.lists(st.sampled_from(_PIECES), max_size=12).map("".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(_TEXTS)
def test_any_text_builds_phrases_its_own_words_hold(runtime: Runtime, words: str) -> None:
    """No text a caller sends fails to build (an error would fail the recall), and a
    memory saying exactly the query's words holds one of its phrases whenever the index
    reads two of them side by side. (Read with hyphens as spaces, a text can have
    phrases its own document does not hold: "0a-a.aa" is one host name to the parser.)"""
    phrases, held = _phrases(runtime, words, words)
    side_by_side = _side_by_side(runtime, words)
    event("side by side" if side_by_side else "phrases" if phrases else "no phrase")
    if side_by_side:
        assert phrases is not None and held


def _side_by_side(runtime: Runtime, words: str) -> bool:
    """Whether the index reads two lexemes of ``words`` at adjacent positions."""
    placed = "SELECT unnest(positions) AS p FROM unnest(to_tsvector(%s::regconfig, %s))"
    [(count,)] = owner_rows(
        runtime,
        f"SELECT count(*) FROM ({placed}) a JOIN ({placed}) b ON b.p = a.p + 1",
        *(TEXT_SEARCH_CONFIG, words) * 2,
    )
    return bool(count)
