"""Hybrid recall's fusion: one ranking from the vector and the text rankings.

Each list is weighed by how confident it is for this query, then the two are added
(a convex combination of normalised scores, Bruch et al., "An Analysis of Fusion
Functions for Hybrid Retrieval", TOIS 2023), rather than fixed weights for every
query:

- **meaning** is as confident as its nearest memory stands out from the background of
  loosely related ones (:class:`~palimpsest.projections.recall._relevance.Nearest`: the
  similarity of the 20th nearest), fully from a lead of :data:`FULL_LEAD` on; a memory
  scores its lead over the background as a share of the nearest one's;
- **words** are as confident as the best text candidate's word weight (the share of
  the query's word weight it holds: BM25's weights from the tenant's document
  frequencies, :mod:`palimpsest.projections.recall._words`), square-rooted, so that
  holding half the weight is already most of the confidence; a memory scores its
  weight as a share of the best one's.

The words' part weighs :data:`TEXT_SHARE` of the sum. So a question whose rare words
a memory holds ("What did Caroline research?") is answered by words, and a question
of common words whose meaning stands out ("art styles") by meaning, without a rule
about which queries are which. Fixed weights tuned on 302 short statements, where
meaning was the stronger list, buried the words of conversations (LoCoMo: hybrid
0.538 against text 0.643, hit@10). The constants were chosen on LoCoMo's development
conversations and the knowledge-updates development split (docs/recall.md,
"Conversations: LoCoMo, and the levers of issue 45").

The fused score lies in [0, 1]: 1 for a memory first in both lists with both fully
confident. A query that names a month (:mod:`palimpsest.projections.recall._named_months`)
adds :data:`TIME_BONUS` to the memories whose time falls in it (:func:`dated`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from uuid import UUID

from palimpsest.projections.recall._named_months import NamedMonth

__all__ = ["FULL_LEAD", "Fused", "TEXT_SHARE", "TIME_BONUS", "confidence", "dated", "fuse"]

FULL_LEAD = 0.25
"""A nearest memory this much more similar than the background makes meaning fully
confident; less, proportionally less."""

TEXT_SHARE = 0.4
"""The words' share of the fused score; meaning has the rest."""

TIME_BONUS = 0.2
"""Added to the fused score of a memory whose time falls in a month the query names.
Chosen on LoCoMo's development conversations, whose questions name a month in 111 of
996 ("When did Melanie go camping in June?"): replayed, 0.05 lifted hit@10 from 0.744
to 0.754 and 0.2 to 0.761 (docs/recall.md). A bonus, not a filter: the month is a
hint about the answer's time, and a memory that matches the question well by words and
meaning (a fused score up to 1) still ranks above one that only falls in the month."""


@dataclass(frozen=True)
class Fused:
    """A memory's place in each list (1-based, None when absent) and its fused score."""

    vector_rank: int | None
    text_rank: int | None
    score: float
    in_named_month: bool = False
    """Its time falls in a month the query names (:func:`dated` raised ``score``)."""


def _ranks(ranking: Sequence[tuple[UUID, float]]) -> dict[UUID, int]:
    """Return each memory's 1-based rank; equal scores share the better rank (1, 2, 2, 4):
    memories a list cannot tell apart must not be told apart by their order in it."""
    ranks: dict[UUID, int] = {}
    previous: float | None = None
    rank = 0
    for place, (memory_id, score) in enumerate(ranking, start=1):
        if score != previous:
            rank, previous = place, score
        ranks[memory_id] = rank
    return ranks


def confidence(
    best_similarity: float | None,
    background: float,
    best_weight: float,
    *,
    full_lead: float = FULL_LEAD,
) -> tuple[float, float]:
    """Return the confidence, each in [0, 1], of the vector and the text list for a
    query whose nearest memory is ``best_similarity`` similar (None: no vector list)
    over a ``background``, and whose best text candidate holds ``best_weight`` of the
    query's word weight."""
    lead = 0.0 if best_similarity is None else best_similarity - background
    return (
        min(1.0, max(0.0, lead / full_lead)),
        math.sqrt(min(1.0, max(0.0, best_weight))),
    )


def fuse(
    by_vector: Sequence[tuple[UUID, float]],
    by_text: Sequence[tuple[UUID, float]],
    *,
    background: float,
    text_share: float = TEXT_SHARE,
    full_lead: float = FULL_LEAD,
) -> dict[UUID, Fused]:
    """Return the fused score of every memory in either ranking.

    ``by_vector`` holds (memory, similarity) pairs and ``by_text`` (memory, word
    weight) pairs, each best first; ``background`` is the similarity of the query's
    background (:class:`~palimpsest.projections.recall._relevance.Nearest`).
    ``text_share`` and ``full_lead`` are :data:`TEXT_SHARE` and :data:`FULL_LEAD`
    unless a benchmark's grid tries others.
    """
    best_similarity = by_vector[0][1] if by_vector else None
    best_weight = by_text[0][1] if by_text else 0.0
    vector_confidence, text_confidence = confidence(
        best_similarity, background, best_weight, full_lead=full_lead
    )
    lead = (best_similarity or 0.0) - background
    scores: dict[UUID, float] = {}
    if lead > 0:
        for memory_id, similarity in by_vector:
            share = max(0.0, similarity - background) / lead
            scores[memory_id] = (1 - text_share) * vector_confidence * share
    if best_weight > 0:
        for memory_id, weight in by_text:
            share = weight / best_weight
            scores[memory_id] = scores.get(memory_id, 0.0) + text_share * text_confidence * share
    vector_ranks = _ranks(by_vector)
    text_ranks = _ranks(by_text)
    return {
        memory_id: Fused(
            vector_ranks.get(memory_id), text_ranks.get(memory_id), scores.get(memory_id, 0.0)
        )
        for memory_id in {*vector_ranks, *text_ranks}
    }


def dated(
    places: Mapping[UUID, Fused],
    times: Mapping[UUID, datetime | None],
    months: Sequence[NamedMonth],
    *,
    bonus: float = TIME_BONUS,
) -> dict[UUID, Fused]:
    """Return ``places`` with ``bonus`` added to the score of each memory whose time
    (``times``; None or absent: not dated yet) falls in one of ``months``."""
    return {
        memory_id: replace(place, score=place.score + bonus, in_named_month=True)
        if (at := times.get(memory_id)) is not None and any(m.holds(at) for m in months)
        else place
        for memory_id, place in places.items()
    }
