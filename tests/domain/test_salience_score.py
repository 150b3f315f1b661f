"""The score reads expose: bounded, order-preserving, and blind to the pin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.salience import DEFAULT_HALF_LIVES, salience, score

NOW = datetime(2026, 11, 29, tzinfo=UTC)
SALIENCES = st.floats(0.0, 1e300)


@given(a=SALIENCES, b=SALIENCES)
def test_the_score_is_bounded_and_keeps_the_order(a: float, b: float) -> None:
    assert 0.0 <= score(a) <= 1.0
    if a <= b:
        assert score(a) <= score(b)


@given(
    base=st.floats(0.0, 1.0),
    memory_type=st.sampled_from(sorted(DEFAULT_HALF_LIVES)),
    age=st.floats(0.0, 10_000.0),
    accesses=st.integers(0, 10**9),
)
def test_any_memory_scores_within_bounds_however_often_read(
    base: float, memory_type: str, age: float, accesses: int
) -> None:
    unpinned = salience(
        base=base,
        memory_type=memory_type,
        first_recorded=NOW - timedelta(days=age),
        last_access=None,
        accesses=accesses,
        pinned=False,
        now=NOW,
    )
    assert 0.0 <= score(unpinned) <= 1.0


def test_the_mapping_is_the_documented_one() -> None:
    assert score(0.0) == 0.0
    assert score(1.0) == 0.5
    assert score(3.0) == 0.75
    with pytest.raises(ValueError):
        score(-0.1)
    with pytest.raises(ValueError):
        score(float("nan"))
