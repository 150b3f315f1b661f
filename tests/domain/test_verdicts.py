"""Verdicts: every answer form maps to its action, and logprobs become a distribution."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.verdicts import (
    ACTIONS,
    LETTERS,
    Verdict,
    choice_mass,
    distribution_from_top_logprobs,
    parse_answer,
    parse_verdict,
)

MAPPING = {
    "keep": "keep",
    "keep_both": "keep",
    "archive": "archive",
    "archive_older": "archive",
    "supersede": "supersede",
    "supersede_older": "supersede",
    "supersede_by:s0n1": "supersede",
    "conflict": "conflict",
    "conflict_with:p3": "conflict",
    "A": "keep",
    "B": "archive",
    "C": "supersede",
    "D": "conflict",
    # Other spellings a model writes: any case, hyphens, surrounding space.
    "  Keep\n": "keep",
    "ARCHIVE_OLDER": "archive",
    "keep-both": "keep",
    "supersede-by:s0n0": "supersede",
    "Conflict_With: s2n1": "conflict",
    "C s0n1": "supersede",
    "D\ts3n2": "conflict",
    "supersede s1n0": "supersede",
}


def test_the_choices_are_lettered_in_the_seeds_order() -> None:
    assert ACTIONS == ("keep", "archive", "supersede", "conflict")
    assert [parse_verdict(letter) for letter in LETTERS] == list(ACTIONS)


@pytest.mark.parametrize(("answer", "action"), MAPPING.items())
def test_every_alias_of_the_seed_maps_to_its_action(answer: str, action: str) -> None:
    assert parse_verdict(answer) == action


def test_an_answer_that_names_a_memory_carries_its_ref() -> None:
    assert parse_answer("supersede_by:s0n1") == ("supersede", "s0n1")
    assert parse_answer("conflict_with:p3") == ("conflict", "p3")
    assert parse_answer("C s0n1") == ("supersede", "s0n1")
    assert parse_answer("supersede_older") == ("supersede", None)
    assert parse_answer("A") == ("keep", None)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   ",
        "a",  # letters are upper case only
        "E",
        "AB",
        "A.",
        "A) keep",
        "keep it",
        "A s0n1",  # only supersede and conflict name a memory
        "archive_older:s0n1",
        "keep_both:s0",
        "supersede_by:",
        "supersede_by",
        "conflict_with:<id>",
        "delete",
        "merge",
        "I think the newer one replaces it",
        "C s0n1 because it is newer",
    ],
)
def test_anything_else_is_refused(answer: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_verdict(answer)


def test_a_distribution_renormalises_the_letters_the_server_listed() -> None:
    # Given the top logprobs at an answer token, with other tokens among them
    entries = [
        ("A", math.log(0.5)),
        (" B", math.log(0.2)),
        ("<", math.log(0.1)),
        ("C", math.log(0.05)),
        ("D", math.log(0.05)),
    ]
    distribution = distribution_from_top_logprobs(entries)
    # Then the letters share all the probability, in proportion
    assert distribution is not None
    assert distribution["keep"] == pytest.approx(0.5 / 0.8)
    assert distribution["archive"] == pytest.approx(0.2 / 0.8)
    assert distribution["supersede"] == pytest.approx(0.05 / 0.8)
    assert choice_mass(entries) == pytest.approx(0.8)


def test_two_spellings_of_a_letter_add_up() -> None:
    entries = [("A", math.log(0.3)), (" A", math.log(0.3)), ("B", math.log(0.2)), ("C", -5.0)]
    distribution = distribution_from_top_logprobs(entries)
    assert distribution is not None
    assert distribution["keep"] > distribution["archive"] * 2.9


def test_a_missing_letter_gets_the_smallest_listed_logprob() -> None:
    # Given a list without D, whose smallest entry is another token
    entries = [("A", -0.1), ("B", -2.0), ("C", -3.0), ("the", -6.0)]
    distribution = distribution_from_top_logprobs(entries)
    assert distribution is not None
    # Then D weighs what the smallest listed token does, no more
    weights = [math.exp(v) for v in (-0.1, -2.0, -3.0, -6.0)]
    assert distribution["conflict"] == pytest.approx(weights[3] / sum(weights))


def test_lower_case_letters_and_words_name_no_choice() -> None:
    assert distribution_from_top_logprobs([("a", -0.1), ("keep", -0.5), ("Answer", -1.0)]) is None
    assert distribution_from_top_logprobs([]) is None
    assert choice_mass([("a", -0.1)]) == 0.0


def test_letters_with_no_probability_at_all_give_no_distribution() -> None:
    assert distribution_from_top_logprobs([("A", -math.inf), ("B", -math.inf)]) is None


def test_a_verdict_refuses_numbers_that_are_not_probabilities() -> None:
    even = dict.fromkeys(ACTIONS, 0.25)
    Verdict("s0", "keep", 0.25, even, "m")
    with pytest.raises(InvalidInputError):
        Verdict("s0", "keep", 1.5, even, "m")
    with pytest.raises(InvalidInputError):
        Verdict("s0", "keep", 0.5, {"keep": 0.5, "archive": 0.5}, "m")
    with pytest.raises(InvalidInputError):
        Verdict("s0", "delete", None, None, "m")  # type: ignore[arg-type]


_TOKENS = st.sampled_from(["A", "B", "C", "D", " A", " C", "\nB", "a", "x", "<", "keep", "1"])
_LOGPROB = st.floats(min_value=-50.0, max_value=0.0, allow_nan=False)
_ENTRIES = st.lists(st.tuples(_TOKENS, _LOGPROB), max_size=20)


@given(_ENTRIES)
def test_a_distribution_sums_to_one(entries: list[tuple[str, float]]) -> None:
    distribution = distribution_from_top_logprobs(entries)
    if distribution is None:
        assert not any(token.strip() in LETTERS for token, _ in entries)
        return
    assert list(distribution) == list(ACTIONS)
    assert math.isclose(sum(distribution.values()), 1.0, rel_tol=1e-9)
    assert all(0.0 <= p <= 1.0 for p in distribution.values())


@given(_ENTRIES)
def test_the_most_likely_letter_is_the_most_likely_action(entries: list[tuple[str, float]]) -> None:
    distribution = distribution_from_top_logprobs(entries)
    if distribution is None:
        return
    combined = {letter: 0.0 for letter in LETTERS}
    for token, logprob in entries:
        if token.strip() in LETTERS:
            combined[token.strip()] += math.exp(logprob)
    best = max(combined.values())
    top = max(distribution.values())
    for letter, action in zip(LETTERS, ACTIONS, strict=True):
        if combined[letter] == best and best > 0:
            assert math.isclose(distribution[action], top, rel_tol=1e-9)


@given(_ENTRIES)
def test_a_missing_letter_never_outweighs_a_listed_one(entries: list[tuple[str, float]]) -> None:
    distribution = distribution_from_top_logprobs(entries)
    if distribution is None:
        return
    listed = {token.strip() for token, _ in entries}
    missing = [a for letter, a in zip(LETTERS, ACTIONS, strict=True) if letter not in listed]
    present = [a for letter, a in zip(LETTERS, ACTIONS, strict=True) if letter in listed]
    for absent in missing:
        for shown in present:
            assert distribution[absent] <= distribution[shown] * (1 + 1e-9)


@given(_ENTRIES, st.floats(min_value=-20.0, max_value=20.0, allow_nan=False))
def test_a_distribution_depends_only_on_differences_of_logprobs(
    entries: list[tuple[str, float]], shift: float
) -> None:
    before = distribution_from_top_logprobs(entries)
    after = distribution_from_top_logprobs([(t, v + shift) for t, v in entries])
    if before is None or after is None:
        assert before is None and after is None
        return
    for action in ACTIONS:
        assert math.isclose(before[action], after[action], rel_tol=1e-6, abs_tol=1e-12)
