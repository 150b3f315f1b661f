"""How well a recalled memory matches, and whether it matches at all.

Fusion ranks by places, not by strengths (:mod:`palimpsest.projections.recall._fusion`):
the first memory by meaning scores as high when nothing in the store is about the
query as when one answers it. So recall reports a strength a reader can compare
across queries (:func:`relevance`: the better of the cosine similarity and the text
score), says whether the words matched (:func:`text_match`), and by default leaves
out what matches neither by meaning nor by words (:func:`matches`): a query about
something the store does not hold comes back empty, not with the least unrelated
memories.

Whether anything matches by meaning is decided from the nearest memories, not by one
floor for every memory (:class:`Nearest`). Asked in another conversation's scope,
LoCoMo's questions found a nearest memory 0.35 similar (median; 0.44 at the 90th
percentile) and in their own 0.62 (0.53 at the 10th), but a short paraphrase can
answer at 0.38 to 0.42 ("When do we ship releases to prod?" and "Production deploys
happen on Friday afternoons": 0.379): no floor told these apart. What does is how far
the nearest stands out from the store's background of loosely related memories (the
20th nearest): chit-chat about the same life has many at 0.3, a store that holds the
answer has it well above the rest. The constants were chosen on development data
(docs/recall.md, "When nothing matches"): LoCoMo's questions in their own scope and
in another conversation's, and the knowledge-updates questions.
"""

from __future__ import annotations

from dataclasses import dataclass

from palimpsest.projections.recall.recalled import RecallMode, TextMatch

__all__ = [
    "BACKGROUND_RANK",
    "MEANING_FLOOR",
    "Nearest",
    "STANDOUT",
    "STRONG",
    "WEAK",
    "WORDS_SHARE",
    "matches",
    "relevance",
    "text_match",
]

STRONG = 0.50
"""A query whose nearest memory is at least this similar matches by meaning."""

WEAK = 0.30
"""A query whose nearest memory is less similar than this matches nothing by meaning."""

STANDOUT = 0.15
"""Between :data:`WEAK` and :data:`STRONG`, the query matches by meaning when its
nearest memory is at least this much more similar than the background
(:data:`BACKGROUND_RANK`)."""

BACKGROUND_RANK = 20
"""The background is the similarity of the query's 20th nearest memory (0 when the
recall's kind of memories holds fewer: no background of related ones)."""

MEANING_FLOOR = 0.25
"""When a query matches by meaning, a memory at least this similar to it matches too."""

WORDS_SHARE = 0.5
"""A memory holding at least this share of the query's words (its lexemes: stop words
dropped, words stemmed) matches it by words."""


@dataclass(frozen=True)
class Nearest:
    """What the query's nearest memories say: the best similarity and the background."""

    best: float | None
    background: float

    @classmethod
    def of(cls, similarities: list[float]) -> Nearest:
        """Return the nearest of ``similarities`` (of the nearest memories, best first,
        at least :data:`BACKGROUND_RANK` of them when the kind holds that many)."""
        if not similarities:
            return cls(None, 0.0)
        deep = len(similarities) >= BACKGROUND_RANK
        return cls(similarities[0], similarities[BACKGROUND_RANK - 1] if deep else 0.0)

    @property
    def matched(self) -> bool:
        """Whether the query matches anything by meaning."""
        best = self.best
        if best is None or best < WEAK:
            return False
        return best >= STRONG or best - self.background >= STANDOUT


def text_match(word_share: float | None) -> TextMatch:
    """Return whether a memory holds all, some or none of the query's words, from the
    share of them it holds (None: the text search did not find it)."""
    if not word_share:
        return "none"
    return "all" if word_share >= 1.0 else "some"


def relevance(similarity: float | None, text_score: float | None) -> float:
    """Return how well a memory matches, in [0, 1]: the better of its cosine
    similarity and its text score (0.5 and above: it holds every word)."""
    return max(0.0, similarity or 0.0, text_score or 0.0)


def matches(
    similarity: float | None,
    word_share: float | None,
    *,
    phrased: bool = False,
    mode: RecallMode,
    min_similarity: float | None,
    nearest: Nearest,
) -> bool:
    """Return whether recall keeps a memory found with ``similarity`` to the query and
    holding ``word_share`` of its words (``phrased``: and one of its phrases).

    ``min_similarity`` given: kept when at least that similar (0 keeps everything).
    Otherwise the default floor: in ``text`` mode everything found holds a word of
    the query and is kept; in the others a memory is kept when it matches by words
    (at least :data:`WORDS_SHARE` of them, or one of its phrases: two words of the
    query side by side, such as "Universal Studios" in a question of eleven words;
    ``hybrid`` only, as ``vector`` mode does not search words) or by meaning: the
    query matches by meaning (``nearest``: :attr:`Nearest.matched`) and this memory is
    at least :data:`MEANING_FLOOR` similar.
    """
    if min_similarity is not None:
        return min_similarity <= 0 or (similarity is not None and similarity >= min_similarity)
    if mode == "text":
        return True
    if mode == "hybrid" and (phrased or (word_share is not None and word_share >= WORDS_SHARE)):
        return True
    return nearest.matched and similarity is not None and similarity >= MEANING_FLOOR
