"""The chat request a judge sends for one batch: instructions, the state, the answer format.

One request per batch. The model answers each item, in order, with two
lines: the item's ref and a colon, then its letter alone (a single's
supersede or conflict adds the newer memory's ref: ``C s0n1``)::

    p0:
    A
    s0:
    C s0n1

The letter starts a line on purpose. Tokenizers never merge a newline with
the letter after it (they do merge a space: `` A``), so the letter is one
token, ``A`` to ``D``, chosen at one position, and the ``top_logprobs`` at
that position are the model's distribution over the letters. After ``p0: ``
instead, a grammar-constrained sampler may emit a lone space first and pick
the letter where the model never meant to write one (SmolLM2 did exactly
that when recorded).

With ``constraint="gbnf"`` a GBNF grammar (llama.cpp's ``grammar`` request
field) forces exactly that text, so every answer parses; the server still
reports the model's own, unconstrained distribution in ``top_logprobs``,
which :mod:`palimpsest.projections.judgment._answers` reads. llama.cpp's server also
applies a repeat penalty of 1.1 by default, which would push each line away
from the letters of the lines before it; the request sets it to 1. With
``constraint="none"`` (a hosted endpoint that refuses unknown fields) the
format is only asked for.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from palimpsest.domain.judge_state import (
    JSONValue,
    JudgeItem,
    PairItem,
    neighbour_ref,
    render_state,
)
from palimpsest.domain.verdicts import LETTERS

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "Constraint",
    "SYSTEM_PROMPT",
    "TOP_LOGPROBS",
    "answer_grammar",
    "canonical_json",
    "request_body",
    "request_chars",
]

Constraint = Literal["gbnf", "none"]
"""How the answer format is enforced: a GBNF grammar, or only the instructions."""

TOP_LOGPROBS = 20
"""Alternatives asked for at each answer token (OpenAI's maximum)."""

SYSTEM_PROMPT = """\
You review the long-term memories an assistant keeps about a person, and decide \
which ones are finished. The user message is a JSON state. "now" is the current \
time. Each item has a "ref".
A "single" item is one memory nobody has touched for a while ("memory"), with \
the newer memories of the same type ("newer", each with its own "ref").
A "pair" item is an "older" and a "newer" memory of the same type that may say \
different things about the same subject; "similarity" is how alike they read.
For each item choose one letter:
A) keep: the memory (for a pair, both) is still valid and useful.
B) archive: the memory (for a pair, the older one) is out of date or no longer \
useful.
C) supersede: a newer memory replaces it; for a pair, the newer replaces the \
older; for a single, write the ref of the newer memory after the letter.
D) conflict: it contradicts a newer memory and a person must decide; for a \
single, write the ref of that newer memory after the letter.
A single without newer memories can only be A or B. The same routine or event \
on different days does not replace itself.
Answer every item in the order given: a line with its ref and a colon, then a \
line with your letter, and nothing else. For example:
p0:
A
s1:
C s1n0"""
"""The instructions: the choices lettered in :data:`palimpsest.domain.verdicts.ACTIONS` order."""


def canonical_json(value: JSONValue) -> str:
    """Return ``value`` as canonical JSON: sorted keys, no spaces, UTF-8 text unescaped.

    Request bodies are sent in this form, and recordings are keyed by its digest.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _answer_lines(item: JudgeItem) -> list[str]:
    """Every answer the format allows for ``item`` (without the final newline)."""
    if isinstance(item, PairItem) or not item.newer:
        letters = LETTERS if isinstance(item, PairItem) else LETTERS[:2]
        return [f"{item.ref}:\n{letter}" for letter in letters]
    refs = [neighbour_ref(item, i) for i in range(len(item.newer))]
    return [f"{item.ref}:\n{letter}" for letter in LETTERS[:2]] + [
        f"{item.ref}:\n{letter} {ref}" for letter in LETTERS[2:] for ref in refs
    ]


def answer_grammar(items: Sequence[JudgeItem]) -> str:
    """Return the GBNF grammar of the whole answer: each item's two lines, in order.

    A pair may answer any letter; a single with newer memories A or B, or C or
    D followed by one of its neighbours' refs; a single without any, A or B.
    Refs match :data:`palimpsest.domain.verdicts.REF_PATTERN`, so they need no escaping.
    """
    rules: list[str] = []
    for item in items:
        if isinstance(item, PairItem):
            choice = "[ABCD]"
        elif not item.newer:
            choice = "[AB]"
        else:
            refs = " | ".join(f'"{neighbour_ref(item, i)}"' for i in range(len(item.newer)))
            choice = f'( [AB] | [CD] " " ( {refs} ) )'
        rules.append(f'"{item.ref}:\\n" {choice} "\\n"')
    return "root ::= " + " ".join(rules)


def request_body(
    model: str,
    now: datetime,
    items: Sequence[JudgeItem],
    *,
    constraint: Constraint = "gbnf",
    logprobs: bool = True,
) -> dict[str, JSONValue]:
    """Return the ``/v1/chat/completions`` body that asks for the batch's verdicts.

    Greedy decoding (temperature 0); ``max_tokens`` bounds the longest answer
    the format allows (a token is at least one character), so a model that
    rambles is cut off and its unanswered items fail. With ``logprobs`` the
    server is asked for the top 20 alternatives at every answer token.

    Raises:
        InvalidInputError: the items cannot be rendered.
    """
    state = render_state(now, items)
    order = ", ".join(item.ref for item in items)
    user = f"{canonical_json(state)}\n\nAnswer for {order}."
    longest = sum(max(len(line) for line in _answer_lines(item)) + 1 for item in items)
    body: dict[str, JSONValue] = {
        "model": model,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ],
        "temperature": 0,
        "max_tokens": longest + 8,
    }
    if logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = TOP_LOGPROBS
    if constraint == "gbnf":
        body["grammar"] = answer_grammar(items)
        body["repeat_penalty"] = 1  # llama.cpp's default, 1.1, skews every line after the first
    return body


def request_chars(
    model: str,
    now: datetime,
    items: Sequence[JudgeItem],
    *,
    constraint: Constraint = "gbnf",
    logprobs: bool = True,
) -> int:
    """Return the length of the request body as sent, in characters (what the batcher limits)."""
    body = request_body(model, now, items, constraint=constraint, logprobs=logprobs)
    return len(canonical_json(body))
