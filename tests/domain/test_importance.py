"""The default importance heuristic: type, grade and how much the text says."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.forgetting_policy import DEFAULT_POLICY
from palimpsest.domain.importance import (
    GRADE_ADJUSTMENT,
    TYPE_IMPORTANCE,
    HeuristicImportance,
    ImportanceInput,
    information,
)
from palimpsest.domain.retention_score import Factors, bucket, recency, retention_score
from palimpsest.domain.salience import confidence

types = st.sampled_from(sorted(TYPE_IMPORTANCE))
grades = st.sampled_from(sorted(GRADE_ADJUSTMENT))
texts = st.text(max_size=300)
SCORER = HeuristicImportance()

SMALL_TALK = "Melanie: Thanks, you too! Wow, that's really great!"
SPECIFIC = (
    "Caroline: I went to the LGBTQ support group in Boston on 7 May 2023, and next"
    " week I start counseling classes at Lakeside College with Dr Rivera."
)


def _importance(memory_type: str, grade: str, text: str | None) -> float:
    return SCORER.importance(ImportanceInput(memory_type, grade, False, text=text))


@given(types, grades, texts)
def test_a_text_never_raises_importance_above_its_type_and_grade(
    memory_type: str, grade: str, text: str
) -> None:
    value = _importance(memory_type, grade, text)
    assert 0.0 <= value <= _importance(memory_type, grade, None)
    assert value < DEFAULT_POLICY.importance_floor


@given(types, grades, texts, st.text(min_size=1, max_size=40))
def test_saying_more_never_lowers_importance(
    memory_type: str, grade: str, text: str, more: str
) -> None:
    assert _importance(memory_type, grade, f"{text} {more}") >= _importance(
        memory_type, grade, text
    )


@given(types, grades, texts, texts)
def test_of_two_texts_the_more_informative_is_at_least_as_important(
    memory_type: str, grade: str, one: str, other: str
) -> None:
    if information(one) >= information(other):
        assert _importance(memory_type, grade, one) >= _importance(memory_type, grade, other)


@given(grades, texts)
def test_with_the_same_informative_text_a_decision_outweighs_a_note(grade: str, text: str) -> None:
    if information(text) > 0:
        assert _importance("decision", grade, text) > _importance("note", grade, text)


@pytest.mark.parametrize("memory_type", sorted(TYPE_IMPORTANCE))
@pytest.mark.parametrize("grade", sorted(GRADE_ADJUSTMENT))
def test_small_talk_keeps_none_of_its_types_weight_and_a_specific_text_keeps_all(
    memory_type: str, grade: str
) -> None:
    assert _importance(memory_type, grade, "Thanks, you too!") == 0.0
    assert information(SPECIFIC) == 1.0
    assert _importance(memory_type, grade, SPECIFIC) == _importance(memory_type, grade, None)


def test_a_pin_or_an_explicit_importance_ignores_the_text() -> None:
    assert SCORER.importance(ImportanceInput("note", "supported", True, text="ok")) == 1.0
    assert SCORER.importance(ImportanceInput("note", "supported", False, 0.6, text="ok")) == 0.6


def _default_bucket(text: str, age: timedelta) -> str:
    """Where the default policy puts a supported note of ``text`` nobody read for ``age``
    (its scope the busiest: nearness 1)."""
    importance = _importance("note", "supported", text)
    now = datetime(2024, 1, 1, tzinfo=UTC)
    factors = Factors(
        importance=importance,
        recency=recency(
            snapshot=now,
            last_access=None,
            memory_time=now - age,
            half_life=DEFAULT_POLICY.half_life("note"),
        ),
        scope=1.0,
        trust=confidence("supported", [1.0]),
    )
    return bucket(
        retention_score(factors, DEFAULT_POLICY.weights),
        importance=importance,
        pinned=False,
        duplicate=False,
        importance_floor=DEFAULT_POLICY.importance_floor,
        fade_below=DEFAULT_POLICY.fade_below,
        prune_below=DEFAULT_POLICY.prune_below,
    )


def test_the_default_policy_prunes_old_small_talk_but_only_fades_an_old_specific_note() -> None:
    # Given two supported notes of a conversation, unread for a year
    year = timedelta(days=365)
    # Then the small talk is pruned and the specific one only fades
    assert _default_bucket(SMALL_TALK, year) == "prune"
    assert _default_bucket(SPECIFIC, year) == "fade"
    # And a week-old note is kept however little it says
    assert _default_bucket(SMALL_TALK, timedelta(days=7)) == "keep"
