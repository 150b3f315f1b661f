"""The salience formula: monotonicity, bounds, half-life exactness, pin dominance."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.salience import (
    DEFAULT_HALF_LIVES,
    DOMINANCE_HORIZON_HALF_LIVES,
    DOMINANCE_MAX_ACCESSES,
    GRADE_WEIGHTS,
    PIN_BOOST,
    confidence,
    decay,
    salience,
)

NOW = datetime(2026, 11, 29, tzinfo=UTC)
TYPES = st.sampled_from(sorted(DEFAULT_HALF_LIVES))
BASES = st.floats(0.0, 1.0)
AGES = st.floats(0.0, 10_000.0)  # days
ACCESSES = st.integers(0, 10**6)


def _s(
    base: float = 0.8,
    memory_type: str = "fact",
    age_days: float = 0.0,
    accesses: int = 0,
    pinned: bool = False,
    last_access_days: float | None = None,
) -> float:
    return salience(
        base=base,
        memory_type=memory_type,
        first_recorded=NOW - timedelta(days=age_days),
        last_access=None if last_access_days is None else NOW - timedelta(days=last_access_days),
        accesses=accesses,
        pinned=pinned,
        now=NOW,
    )


@given(base=BASES, memory_type=TYPES, a=AGES, b=AGES, accesses=ACCESSES, pinned=st.booleans())
def test_older_is_never_more_salient(
    base: float, memory_type: str, a: float, b: float, accesses: int, pinned: bool
) -> None:
    younger, older = sorted((a, b))
    assert _s(base, memory_type, older, accesses, pinned) <= _s(
        base, memory_type, younger, accesses, pinned
    )


@given(base=BASES, memory_type=TYPES, age=AGES, a=ACCESSES, b=ACCESSES)
def test_more_accesses_are_never_less_salient(
    base: float, memory_type: str, age: float, a: int, b: int
) -> None:
    fewer, more = sorted((a, b))
    assert _s(base, memory_type, age, more) >= _s(base, memory_type, age, fewer)


@given(base=BASES, memory_type=TYPES, age=AGES, accesses=ACCESSES)
def test_bounds(base: float, memory_type: str, age: float, accesses: int) -> None:
    value = _s(base, memory_type, age, accesses)
    assert 0.0 <= value <= base * (1 + math.log1p(accesses))
    assert _s(base, memory_type, 0.0, 0) == pytest.approx(base)


@pytest.mark.parametrize("memory_type", sorted(DEFAULT_HALF_LIVES))
@pytest.mark.parametrize("lives", [1, 2, 3, 10])
def test_each_half_life_halves_exactly(memory_type: str, lives: int) -> None:
    days = DEFAULT_HALF_LIVES[memory_type].total_seconds() / 86400 * lives
    assert _s(0.8, memory_type, days) == pytest.approx(0.8 / 2**lives, rel=1e-12)


def test_the_last_access_resets_the_clock_and_future_times_count_as_now() -> None:
    assert _s(age_days=3650, last_access_days=0) == _s(age_days=0)
    assert _s(age_days=-5) == _s(age_days=0)
    assert decay(timedelta(days=-1), timedelta(days=1)) == 1.0


@given(
    pinned_base=st.floats(0.003, 1.0),
    pinned_lives=st.floats(0.0, DOMINANCE_HORIZON_HALF_LIVES),
    pinned_type=TYPES,
    other_base=BASES,
    other_type=TYPES,
    other_age=AGES,
    other_accesses=st.integers(0, DOMINANCE_MAX_ACCESSES),
)
def test_a_pinned_memory_outranks_every_unpinned_one(
    pinned_base: float,
    pinned_lives: float,
    pinned_type: str,
    other_base: float,
    other_type: str,
    other_age: float,
    other_accesses: int,
) -> None:
    days = DEFAULT_HALF_LIVES[pinned_type].total_seconds() / 86400 * pinned_lives
    pinned = _s(pinned_base, pinned_type, days, 0, pinned=True)
    other = _s(other_base, other_type, other_age, other_accesses)
    assert pinned > other


@given(base=BASES, memory_type=TYPES, age=AGES, accesses=ACCESSES)
def test_pinning_multiplies_by_the_boost(
    base: float, memory_type: str, age: float, accesses: int
) -> None:
    assert _s(base, memory_type, age, accesses, pinned=True) == pytest.approx(
        _s(base, memory_type, age, accesses) * PIN_BOOST
    )


@given(grade=st.sampled_from(sorted(GRADE_WEIGHTS)), trusts=st.lists(st.floats(0.0, 1.0)))
def test_confidence_is_the_grade_weight_times_mean_trust(grade: str, trusts: list[float]) -> None:
    value = confidence(grade, trusts)
    assert 0.0 <= value <= GRADE_WEIGHTS[grade]
    if not trusts:
        assert value == GRADE_WEIGHTS[grade]


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="grade"):
        confidence("certain", [])
    with pytest.raises(ValueError, match="trust"):
        confidence("supported", [1.5])
    with pytest.raises(ValueError, match="half-life"):
        decay(timedelta(days=1), timedelta(0))
    with pytest.raises(ValueError, match="base"):
        _s(base=1.5)
    with pytest.raises(ValueError, match="accesses"):
        _s(accesses=-1)
    with pytest.raises(ValueError, match="half-life"):
        _s(memory_type="gossip")
