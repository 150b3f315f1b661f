"""Hybrid recall's fusion: one ranking from the vector and the text rankings.

Weighted reciprocal rank fusion (Cormack et al., SIGIR 2009): a memory at
rank ``r`` of a list scores ``weight / (RRF_K + r)`` from it, and its fused
score is the sum over the lists it is in. Ranks, not scores: cosine
similarities and cover-density ranks are on scales that do not compare, and
a rank is what both lists agree on. The sum is scaled by its largest possible
value (first in both lists), so a fused score lies in (0, 1] and three
decimals still tell neighbouring ranks apart (the ranking's ties go to
salience at three decimals, as similarity's do).

The weights and ``RRF_K`` were chosen on the knowledge-updates development
split (docs/recall.md has the grid and the figures): words weigh little
against meaning in general (natural-language questions gained nothing from
them there), and fully when the query holds a number or an identifier, which
a sentence embedding blurs (:func:`text_weight`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

__all__ = [
    "Fused",
    "IDENTIFIER_TEXT_WEIGHT",
    "PARTIAL_TEXT_WEIGHT",
    "RRF_K",
    "TEXT_WEIGHT",
    "VECTOR_WEIGHT",
    "fuse",
    "text_weight",
]

RRF_K = 10
"""The rank offset of reciprocal rank fusion: larger flattens the head of each list."""

VECTOR_WEIGHT = 1.0
"""The weight of a memory's rank by meaning."""

TEXT_WEIGHT = 0.2
"""The weight of a memory's rank by words when it holds every word of the query."""

IDENTIFIER_TEXT_WEIGHT = 1.0
"""That weight when the query holds a digit (a number, a time, an identifier)."""

PARTIAL_TEXT_WEIGHT = 0.05
"""The weight of a memory's rank by words when it holds only some of them."""


@dataclass(frozen=True)
class Fused:
    """A memory's place in each list (1-based, None when absent) and its fused score."""

    vector_rank: int | None
    text_rank: int | None
    score: float


def text_weight(query: str) -> float:
    """Return the weight of a text candidate holding every word of ``query``."""
    return IDENTIFIER_TEXT_WEIGHT if any(c.isdigit() for c in query) else TEXT_WEIGHT


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


def fuse(
    by_vector: Sequence[tuple[UUID, float]],
    by_text: Sequence[tuple[UUID, float]],
    *,
    k: int = RRF_K,
    vector_weight: float = VECTOR_WEIGHT,
    text_weight: float = TEXT_WEIGHT,
    partial_weight: float = PARTIAL_TEXT_WEIGHT,
    complete: frozenset[UUID] | set[UUID] = frozenset(),
) -> dict[UUID, Fused]:
    """Return the fused score of every memory in either ranking: (memory, score)
    pairs, best first, scores rounded to what the list can tell apart. A text
    candidate in ``complete`` (it holds every word of the query) counts with
    ``text_weight``, any other with ``partial_weight``."""
    vector_ranks = _ranks(by_vector)
    text_ranks = _ranks(by_text)
    best = (vector_weight + text_weight) / (k + 1)
    fused: dict[UUID, Fused] = {}
    for memory_id in {*vector_ranks, *text_ranks}:
        v, t = vector_ranks.get(memory_id), text_ranks.get(memory_id)
        weight = text_weight if memory_id in complete else partial_weight
        score = (vector_weight / (k + v) if v else 0.0) + (weight / (k + t) if t else 0.0)
        fused[memory_id] = Fused(v, t, score / best if best > 0 else 0.0)
    return fused
