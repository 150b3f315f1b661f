"""Hybrid recall's fusion: each list weighed by its confidence for the query (pure)."""

from __future__ import annotations

import math
from uuid import UUID, uuid4

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.projections.recall._fusion import FULL_LEAD, confidence, fuse

_scores = st.lists(st.floats(0.0, 1.0), max_size=40).map(lambda s: sorted(s, reverse=True))
_weights = st.lists(st.floats(0.0, 3.0), max_size=20).map(lambda s: sorted(s, reverse=True))


def _listed(scores: list[float]) -> list[tuple[UUID, float]]:
    return [(uuid4(), s) for s in scores]


@given(_scores, _weights, st.floats(0.0, 1.0))
def test_a_fused_score_lies_in_zero_to_one_and_every_candidate_has_one(
    similarities: list[float], weights: list[float], background: float
) -> None:
    by_vector, by_text = _listed(similarities), _listed(weights)
    fused = fuse(by_vector, by_text, background=background)
    assert set(fused) == {m for m, _ in by_vector} | {m for m, _ in by_text}
    assert all(0.0 <= f.score <= 1.0 for f in fused.values())


@given(_scores, _weights, st.floats(0.0, 1.0))
def test_within_one_list_a_better_place_never_scores_lower(
    similarities: list[float], weights: list[float], background: float
) -> None:
    # Disjoint lists: each memory's score comes from its own list alone.
    by_vector, by_text = _listed(similarities), _listed(weights)
    fused = fuse(by_vector, by_text, background=background)
    for ranking in (by_vector, by_text):
        scores = [fused[m].score for m, _ in ranking]
        assert scores == sorted(scores, reverse=True)


@given(_scores, _weights, st.floats(0.0, 1.0))
def test_places_are_one_based_and_shared_by_equal_scores(
    similarities: list[float], weights: list[float], background: float
) -> None:
    by_vector, by_text = _listed(similarities), _listed(weights)
    fused = fuse(by_vector, by_text, background=background)
    for ranking, place in ((by_vector, "vector_rank"), (by_text, "text_rank")):
        for i, (memory_id, score) in enumerate(ranking):
            first = next(j for j, (_, s) in enumerate(ranking) if s == score)
            assert getattr(fused[memory_id], place) == first + 1 <= i + 1


def test_first_in_both_lists_and_confident_in_both_scores_one() -> None:
    best, other = uuid4(), uuid4()
    fused = fuse([(best, 0.8), (other, 0.4)], [(best, 1.0), (other, 0.5)], background=0.3)
    assert fused[best].score == 1.0
    assert fused[best].vector_rank == fused[best].text_rank == 1


def test_rare_words_a_memory_holds_outrank_meaning_that_does_not_stand_out() -> None:
    # Conversations: "What did Caroline research?" is near many chatty turns (the
    # nearest barely above the background), and one turn holds its rare words. Fixed
    # weights buried it at the text list's first place below meaning's first ten.
    chatty = [(uuid4(), 0.40 - i / 200) for i in range(20)]
    answer = uuid4()
    fused = fuse(chatty, [(answer, 1.0)], background=chatty[-1][1])
    assert max(fused, key=lambda m: fused[m].score) == answer


def test_meaning_that_stands_out_outranks_words_the_query_shares_with_many() -> None:
    # A category name ("art styles") shares a common word with many memories; the
    # memory whose meaning stands out from the background still comes first.
    near = uuid4()
    by_vector = [(near, 0.62), *((uuid4(), 0.30) for _ in range(19))]
    weak_words = [(uuid4(), 0.2) for _ in range(5)]
    fused = fuse(by_vector, weak_words, background=0.30)
    assert max(fused, key=lambda m: fused[m].score) == near


@given(st.floats(-1.0, 1.0) | st.none(), st.floats(-1.0, 1.0), st.floats(0.0, 5.0))
def test_confidence_is_a_weight_in_zero_to_one(
    best: float | None, background: float, best_weight: float
) -> None:
    vector, text = confidence(best, background, best_weight)
    assert 0.0 <= vector <= 1.0 and 0.0 <= text <= 1.0
    if best is not None and best - background >= FULL_LEAD:
        assert vector == 1.0
    if best is None or best <= background:
        assert vector == 0.0
    # Words: half the query's weight held is already most of the confidence.
    assert text == pytest.approx(math.sqrt(min(1.0, best_weight)))
    assert text >= min(1.0, best_weight)


def test_no_lists_fuse_to_nothing() -> None:
    assert fuse([], [], background=0.0) == {}
