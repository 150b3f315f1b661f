"""Reading a judge's answer: each item's line, its verdict, and the distribution at its letter.

The answer text holds each item's ``<ref>:`` line and its answer on the next
(see :mod:`palimpsest.projections.judgment._prompt`; ``<ref>: <answer>`` on one line is
read too). Each item's answer is parsed on its own, so a missing or
malformed one fails that item only. When the server returned
``logprobs.content`` (one entry per generated token, each with its
``top_logprobs``), the tokens are laid end to end over the answer text; the
token that holds an item's letter carries the model's distribution over the
four letters for that item (:func:`palimpsest.domain.verdicts.distribution_from_top_logprobs`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.judge_state import JudgeItem, PairItem, neighbour_ref
from palimpsest.domain.verdicts import (
    LETTERS,
    REF_PATTERN,
    Verdict,
    choice_mass,
    distribution_from_top_logprobs,
    parse_answer,
)
from palimpsest.projections.judgment.judge import ItemFailure

__all__ = [
    "AnswerToken",
    "NO_PROBABILITIES",
    "read_answers",
]

NO_PROBABILITIES = "the server returned no probabilities"
"""The note on a verdict whose response carried no logprobs."""

_REF_LINE = rf"{REF_PATTERN}[ \t]*:[ \t]*$"
_LINE = re.compile(
    rf"^[ \t]*(?P<ref>{REF_PATTERN})[ \t]*:[ \t]*\n?[ \t]*"
    rf"(?P<answer>(?!{_REF_LINE})[^\n]*?)[ \t]*$",
    re.MULTILINE,
)
"""An item's answer: ``ref:`` and the answer on the next line, or on the same one
(never the next item's ``ref:`` line, when an answer is missing)."""


@dataclass(frozen=True)
class AnswerToken:
    """One generated token and the alternatives the server listed for its position."""

    token: str
    top_logprobs: tuple[tuple[str, float], ...]


def _lines(content: str, refs: set[str]) -> dict[str, tuple[str, int]]:
    """Each item's first answer: its text and the offset where that text starts."""
    found: dict[str, tuple[str, int]] = {}
    for match in _LINE.finditer(content):
        ref = match["ref"]
        if ref in refs and ref not in found:
            found[ref] = (match["answer"], match.start("answer"))
    return found


def _check_related(item: JudgeItem, related: str | None, action: str) -> None:
    if isinstance(item, PairItem):
        if related is not None:
            msg = f"a pair's answer names no ref, but {item.ref}'s names {related!r}"
            raise InvalidInputError(msg)
        return
    if action not in ("supersede", "conflict"):
        return
    refs = [neighbour_ref(item, i) for i in range(len(item.newer))]
    if related not in refs:
        named = "no newer memory" if related is None else f"{related!r}"
        choices = ", ".join(refs) or "none: it has no newer memories"
        msg = f"{action} for {item.ref} names {named}; its newer memories are {choices}"
        raise InvalidInputError(msg)


def _token_at(tokens: Sequence[AnswerToken], offset: int) -> AnswerToken | None:
    start = 0
    for token in tokens:
        end = start + len(token.token)
        if start <= offset < end:
            return token
        start = end
    return None


def _read_one(
    item: JudgeItem,
    line: tuple[str, int] | None,
    tokens: Sequence[AnswerToken] | None,
    tokens_note: str | None,
    model: str,
) -> Verdict | ItemFailure:
    if line is None:
        return ItemFailure(item.ref, f"the answer has no line for {item.ref}")
    answer, offset = line
    try:
        action, related = parse_answer(answer)
        _check_related(item, related, action)
    except InvalidInputError as e:
        return ItemFailure(item.ref, str(e))
    note = tokens_note
    distribution = None
    mass = None
    if tokens is not None and note is None:
        token = _token_at(tokens, offset)
        letter = answer[:1]
        if letter not in LETTERS:
            note = "the answer is a word, not a letter: no distribution to read"
        elif token is None or token.token.strip() != letter:
            spelled = None if token is None else token.token
            note = f"the answer's token {spelled!r} is not its choice letter alone"
        else:
            distribution = distribution_from_top_logprobs(token.top_logprobs)
            mass = choice_mass(token.top_logprobs)
            if distribution is None:
                note = "no choice letter among the top logprobs at the answer"
    return Verdict(
        ref=item.ref,
        action=action,
        probability=None if distribution is None else distribution[action],
        distribution=distribution,
        model=model,
        note=note,
        related_ref=related,
        choice_mass=mass,
    )


def read_answers(
    items: Sequence[JudgeItem],
    content: str,
    tokens: Sequence[AnswerToken] | None,
    model: str,
) -> list[Verdict | ItemFailure]:
    """Return one verdict or failure per item, in order, from a batch's answer.

    ``tokens`` are the response's ``logprobs.content``, or None when it had
    none: then every verdict says :data:`NO_PROBABILITIES`. When the tokens do
    not spell the answer text exactly, no position can be trusted, and no
    verdict gets a distribution (its note says why). An answer given as a
    word (``keep``) rather than a letter has no distribution either.
    """
    lines = _lines(content, {item.ref for item in items})
    tokens_note = None
    if tokens is None:
        tokens_note = NO_PROBABILITIES
    elif "".join(token.token for token in tokens) != content:
        tokens_note = "the server's logprob tokens do not spell its answer"
    return [_read_one(item, lines.get(item.ref), tokens, tokens_note, model) for item in items]
