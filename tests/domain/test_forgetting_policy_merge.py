"""Partial updates of the forgetting policy and the rule tying its thresholds."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.errors import InconsistentPolicyError
from palimpsest.domain.forgetting_policy import DEFAULT_POLICY, FACTORS, ForgettingPolicy

units = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
changes = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "fade_below": units,
        "prune_below": units,
        "importance_floor": units,
        "weights": st.dictionaries(st.sampled_from(FACTORS), st.floats(0.0, 10.0)),
    },
)


@given(first=changes, second=changes)
def test_a_merge_keeps_every_field_it_does_not_name(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    current = ForgettingPolicy.checked(first)
    merged = ForgettingPolicy.checked(current.merged(second))
    for name, value in current.as_values().items():
        if name == "weights":
            assert merged.weights == {**current.weights, **second.get("weights", {})}
        elif name not in second:
            assert getattr(merged, name) == value
        else:
            assert getattr(merged, name) == second[name]


@given(fade=units, prune=units)
def test_thresholds_are_consistent_exactly_when_prune_is_not_above_fade(
    fade: float, prune: float
) -> None:
    policy = ForgettingPolicy.checked({"fade_below": fade, "prune_below": prune})
    if prune <= fade:
        assert policy.require_consistent() is policy
    else:
        with pytest.raises(InconsistentPolicyError):
            policy.require_consistent()


def test_a_stored_inconsistent_policy_still_loads() -> None:
    # Recorded before the rule: reading it back must not fail the cycle.
    loaded = ForgettingPolicy.checked({"prune_below": 0.6, "fade_below": 0.3}, version=3)
    assert loaded.version == 3 and DEFAULT_POLICY.require_consistent() is DEFAULT_POLICY
