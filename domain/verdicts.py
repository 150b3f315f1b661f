"""Judge verdicts: the four choices, the answers that name them, and their probabilities.

A judge answers each item of the forgetting pass with one of four actions
(:data:`ACTIONS`, in the order the prompt letters them ``A`` to ``D``). The
seed's aliases map onto them (:func:`parse_verdict`), and a model's own
distribution over the four is read from the ``top_logprobs`` an
OpenAI-compatible server reports at the answer token
(:func:`distribution_from_top_logprobs`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from palimpsest.domain.errors import InvalidInputError

__all__ = [
    "ACTIONS",
    "Action",
    "LETTERS",
    "REF_PATTERN",
    "Verdict",
    "choice_mass",
    "distribution_from_top_logprobs",
    "parse_answer",
    "parse_verdict",
]

Action = Literal["keep", "archive", "supersede", "conflict"]
ACTIONS: tuple[Action, ...] = get_args(Action)
"""The choices, in the order the prompt letters them ``A``, ``B``, ``C``, ``D``."""

LETTERS: tuple[str, ...] = ("A", "B", "C", "D")
"""The answer letter of each of :data:`ACTIONS`, in the same order."""

REF_PATTERN = r"[A-Za-z0-9_.\-]+"
"""What an item's or a neighbour's ``ref`` may look like (``s0``, ``s0n1``, ``p3``)."""

_BY_LETTER: dict[str, Action] = dict(zip(LETTERS, ACTIONS, strict=True))
_BY_WORD: dict[str, Action] = {
    "keep": "keep",
    "keep_both": "keep",
    "archive": "archive",
    "archive_older": "archive",
    "supersede": "supersede",
    "supersede_older": "supersede",
    "conflict": "conflict",
}
_WITH_REF: dict[str, Action] = {"supersede_by": "supersede", "conflict_with": "conflict"}
_CHOICE_WITH_REF = re.compile(rf"(?P<choice>\S+)\s+(?P<ref>{REF_PATTERN})")
_ALIAS_WITH_REF = re.compile(rf"(?P<alias>[A-Za-z_\-]+):\s*(?P<ref>{REF_PATTERN})")


def parse_answer(text: str) -> tuple[Action, str | None]:
    """Return the action an answer names, and the ref of the memory it names, if any.

    Accepted, after stripping surrounding whitespace:

    - a letter, upper case only: ``A`` keep, ``B`` archive, ``C`` supersede,
      ``D`` conflict (a lower-case ``a`` reads as a word, not a choice);
    - a word, in any case, with ``-`` read as ``_``: ``keep``, ``keep_both``,
      ``archive``, ``archive_older``, ``supersede``, ``supersede_older``,
      ``conflict``;
    - ``supersede_by:<ref>`` or ``conflict_with:<ref>`` (the seed's forms;
      ``supersede-by:<ref>`` too);
    - ``C <ref>`` or ``D <ref>`` (or ``supersede <ref>``, ``conflict <ref>``):
      the letter answer for a single memory, naming the newer memory.

    Only supersede and conflict may name a ref. Anything else (trailing
    punctuation, a sentence, an empty string) is not an answer.

    Raises:
        InvalidInputError: ``text`` names no choice in one of these forms.
    """
    stripped = text.strip()
    single = _choice(stripped)
    if single is not None:
        return single, None
    aliased = _ALIAS_WITH_REF.fullmatch(stripped)
    if aliased is not None:
        action = _WITH_REF.get(aliased["alias"].lower().replace("-", "_"))
        if action is not None:
            return action, aliased["ref"]
    spaced = _CHOICE_WITH_REF.fullmatch(stripped)
    if spaced is not None:
        action = _choice(spaced["choice"])
        if action in ("supersede", "conflict"):
            return action, spaced["ref"]
    msg = (
        f"the answer {text[:80]!r} is not a choice: expected one of "
        f"{', '.join(LETTERS)}, {', '.join(_BY_WORD)}, supersede_by:<ref> or conflict_with:<ref>"
    )
    raise InvalidInputError(msg)


def parse_verdict(text: str) -> Action:
    """Return the action an answer names (see :func:`parse_answer` for the forms).

    Raises:
        InvalidInputError: ``text`` names no choice.
    """
    return parse_answer(text)[0]


def _choice(word: str) -> Action | None:
    if word in _BY_LETTER:
        return _BY_LETTER[word]
    return _BY_WORD.get(word.lower().replace("-", "_"))


def _letter_logprobs(entries: Sequence[tuple[str, float]]) -> dict[str, float]:
    """Each letter's log probability, summed over its spellings (``A``, `` A``)."""
    found: dict[str, list[float]] = {}
    for token, logprob in entries:
        letter = token.strip()
        if letter in _BY_LETTER and not math.isnan(logprob):
            found.setdefault(letter, []).append(logprob)
    return {letter: _logsumexp(values) for letter, values in found.items()}


def distribution_from_top_logprobs(
    entries: Sequence[tuple[str, float]],
) -> dict[Action, float] | None:
    """Return the model's distribution over :data:`ACTIONS` from one token's ``top_logprobs``.

    ``entries`` are ``(token, logprob)`` pairs as a server reports them at the
    answer token. An entry counts for a choice when its token, stripped of
    whitespace, is that choice's letter (case-sensitive: ``a`` is not ``A``);
    several spellings of one letter (``A`` and `` A``) add up. A letter
    missing from the list gets the smallest logprob listed (of any token) as a
    floor: its true value is at most that, so this never understates a
    choice the server did not show. The four are then renormalised (a
    softmax), so they sum to 1.

    Returns:
        Each action's probability, or None when no entry names a choice (or
        every one that does has probability zero).
    """
    letters = _letter_logprobs(entries)
    if not letters:
        return None
    listed = [logprob for _, logprob in entries if not math.isnan(logprob)]
    floor = min(listed)
    logits = [letters.get(letter, floor) for letter in LETTERS]
    top = max(logits)
    if top == -math.inf:
        return None
    weights = [math.exp(value - top) for value in logits]
    total = sum(weights)
    return {action: weight / total for action, weight in zip(ACTIONS, weights, strict=True)}


def choice_mass(entries: Sequence[tuple[str, float]]) -> float:
    """Return the share of the answer token's probability that the listed letters carry.

    A diagnostic for a distribution: near 1, the model was choosing among the
    letters; low, it wanted to say something else and the renormalised
    distribution says little. Capped at 1 (a server's rounding can pass it).
    """
    letters = _letter_logprobs(entries)
    return min(1.0, sum(math.exp(value) for value in letters.values()))


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(value - top) for value in values))


@dataclass(frozen=True)
class Verdict:
    """A judge's answer for one item: the action, and how sure it was, if it could say."""

    ref: str
    """The item's ``ref`` in the rendered state."""
    action: Action
    probability: float | None
    """The judge's probability of :attr:`action`; None when it gave none (then
    the verdict can never pass a probability threshold)."""
    distribution: dict[Action, float] | None
    """The judge's probability of each of :data:`ACTIONS` (summing to 1), or None."""
    model: str
    """The model that answered, as the server named it."""
    note: str | None = None
    """Why there is no probability, when there is none (``the server returned no
    probabilities``), or anything else a reviewer of the verdict should know."""
    related_ref: str | None = None
    """For a single item's supersede or conflict: the ref of the newer memory
    the answer names (``s0n1``). None otherwise: a pair's other side is implied."""
    choice_mass: float | None = None
    """The share of the answer token's probability on the four letters, when
    the distribution was read from logprobs (see :func:`choice_mass`)."""

    def __post_init__(self) -> None:
        """Refuse a verdict whose numbers cannot be probabilities.

        Raises:
            InvalidInputError: an unknown action, a probability outside [0, 1],
                or a distribution that does not cover exactly the four actions.
        """
        if self.action not in ACTIONS:
            msg = f"unknown action {self.action!r}; expected one of {', '.join(ACTIONS)}"
            raise InvalidInputError(msg)
        if self.probability is not None and not 0.0 <= self.probability <= 1.0:
            msg = f"probability {self.probability!r} of {self.ref} is outside [0, 1]"
            raise InvalidInputError(msg)
        if self.distribution is not None:
            values = self.distribution.values()
            if set(self.distribution) != set(ACTIONS) or not all(0.0 <= p <= 1.0 for p in values):
                msg = f"the distribution of {self.ref} must give each of {ACTIONS} a probability"
                raise InvalidInputError(msg)
