"""Importance: how much a memory matters, whatever its age. One factor of retention.

An ``importance`` given on write (0 to 1) is used as it is. Otherwise a
scorer (:class:`ImportanceScorer`) estimates it; the default,
:class:`HeuristicImportance`, is documented here and in docs/forgetting.md:

- by type (:data:`TYPE_IMPORTANCE`): decisions and blockers weigh most
  (they steer work), preferences and facts next, notes and events least
  (episodic, and many);
- plus the grade's adjustment (:data:`GRADE_ADJUSTMENT`): corroborated
  memories are worth more, unsupported ones less;
- times, when the scorer sees the text, a discount for saying little: its
  *information* (:func:`information`, the seed's "surprise" as a feature
  count rather than entropy) is how many distinct content words, numbers and
  names it carries, from 0 for "Thanks, you too!" to 1 at
  :data:`INFORMATIVE_FEATURES`, and the weight is multiplied by
  ``1 - INFORMATION_SPREAD * (1 - information)``; with the spread at 1 that
  is the information itself, so small talk keeps none of its type's weight
  and recency, scope and trust alone hold it. Among memories of one type
  and grade the ones that say something specific outlive small talk; the
  text never raises importance above its type and grade (so the heuristic
  never reaches the default importance floor: only an explicit importance
  or a pin can);
- a pinned memory is 1 (a person said it matters), so it is never below
  any importance floor.

The result is clamped to [0, 1]. A model-backed scorer may implement the same
interface; the seed's arousal heuristic (word-list sentiment) is not used: it
says little about engineering memories. Information was measured on LoCoMo's
conversations (docs/forgetting.md, "Does forgetting hurt?"): pruning the
least informative 30% of turns loses about 9% of the turns later questions
cite, and fewer of those recall could find at all; with the default policy
the cycle archived 31% of the turns and kept 0.97 of evidence recall (0.95
counting a question found when any of its turns is).

Pure: plain values in, a float out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

__all__ = [
    "Assessment",
    "GRADE_ADJUSTMENT",
    "HeuristicImportance",
    "INFORMATION_SPREAD",
    "INFORMATIVE_FEATURES",
    "ImportanceInput",
    "ImportanceScorer",
    "TYPE_IMPORTANCE",
    "information",
]

TYPE_IMPORTANCE: Mapping[str, float] = MappingProxyType(
    {
        "decision": 0.7,
        "blocker": 0.7,
        "preference": 0.5,
        "fact": 0.5,
        "note": 0.3,
        "event": 0.2,
    }
)

GRADE_ADJUSTMENT: Mapping[str, float] = MappingProxyType(
    {"corroborated": 0.1, "supported": 0.0, "contested": 0.0, "unsupported": -0.1}
)

INFORMATIVE_FEATURES = 20
"""Features (distinct content words, plus numbers and names counted again) at which a
text counts as fully informative."""

INFORMATION_SPREAD = 1.0
"""The share of its type's weight a text with no information loses. All of it:
measured on LoCoMo (docs/forgetting.md), at 0.6 (small talk kept 40%) the decay
cycle that archived 31.5% of the turns kept 0.925 of evidence recall; at 1, one
that archived 30.8% kept 0.966."""

_WORD = re.compile(r"[^\W_](?:[\w'\u2019:./-]*[^\W_])?")
# Words that carry no content of their own: function words and the small talk of
# conversation ("thanks", "wow"). Short on purpose: a word missing here counts as
# content, which errs toward keeping.
_EMPTY = frozenset(
    """
    a about after again all also am an and any are as at be because been before being
    both but by can could did do does doing done for from had has have having he her
    here hers him his how i if in into is it its just me mine more most my no nor not
    now of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to
    too under until up very was we were what when where which while who whom whose
    why will with would you your yours yourself
    oh ah wow yeah yes yep hey hi hello bye thanks thank please sorry okay ok sure
    really great good awesome amazing glad love cool nice totally lot lots much
    that's it's i'm you're i've i'll can't don't didn't isn't
    """.split()  # noqa: SIM905 (a word list reads best as text)
)


@dataclass(frozen=True)
class ImportanceInput:
    """What a scorer sees of one memory."""

    memory_type: str
    grade: str
    pinned: bool
    explicit: float | None = None
    """The ``importance`` given on write, if one was."""
    text: str | None = None
    """The current version's text, for scorers that read it (None: not read)."""


@dataclass(frozen=True)
class Assessment:
    """A scorer's importance for one memory, and whether it is a stand-in."""

    value: float
    """The importance, in [0, 1]."""
    fallback: bool = False
    """Whether the scorer could not give its own answer (a model that failed or
    answered no rating) and gave the heuristic's instead."""


class ImportanceScorer(Protocol):
    """Estimates a memory's importance in [0, 1]."""

    def importance(self, memory: ImportanceInput) -> float:
        """Return the memory's importance, in [0, 1]."""
        ...

    def assess(self, memory: ImportanceInput) -> Assessment:
        """Return the memory's importance, saying whether it fell back to a stand-in."""
        ...


def information(text: str) -> float:
    """Return how much a text says, in [0, 1]: its distinct content words (not in a
    short list of function words and small talk), with each number and each
    capitalised word after the first counted once more, over
    :data:`INFORMATIVE_FEATURES` (at most 1)."""
    words = _WORD.findall(text)
    content = {w.casefold() for w in words if w.casefold() not in _EMPTY}
    specific = sum(
        1
        for i, w in enumerate(words)
        if w.casefold() not in _EMPTY and (any(c.isdigit() for c in w) or (i and w[0].isupper()))
    )
    return min(1.0, (len(content) + specific) / INFORMATIVE_FEATURES)


class HeuristicImportance:
    """The default scorer: explicit, else pinned 1, else by type, grade and text."""

    def assess(self, memory: ImportanceInput) -> Assessment:
        """Return :meth:`importance` (the heuristic never falls back)."""
        return Assessment(self.importance(memory))

    def importance(self, memory: ImportanceInput) -> float:
        """Return the explicit importance if given, 1 if pinned, else the type's
        weight plus the grade's adjustment, clamped to [0, 1], discounted by the
        text's information when the text is given (an unknown type or grade counts
        as a note's weight and no adjustment)."""
        if memory.explicit is not None:
            return min(1.0, max(0.0, memory.explicit))
        if memory.pinned:
            return 1.0
        base = TYPE_IMPORTANCE.get(memory.memory_type, TYPE_IMPORTANCE["note"])
        value = min(1.0, max(0.0, base + GRADE_ADJUSTMENT.get(memory.grade, 0.0)))
        if memory.text is not None:
            value *= 1.0 - INFORMATION_SPREAD * (1.0 - information(memory.text))
        return value
