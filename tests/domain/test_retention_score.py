"""The retention score, its factors and its buckets (seed 004), as properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.forgetting_policy import DEFAULT_POLICY, FACTORS, ForgettingPolicy
from palimpsest.domain.importance import (
    INFORMATION_SPREAD,
    HeuristicImportance,
    ImportanceInput,
    information,
)
from palimpsest.domain.retention_score import (
    Factors,
    bucket,
    recency,
    retention_score,
    scope_nearness,
)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
weight = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)
weights = st.fixed_dictionaries({f: weight for f in FACTORS}).filter(lambda w: sum(w.values()) > 0)
factors = st.builds(Factors, importance=unit, recency=unit, scope=unit, trust=unit)
moment = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
half_life = st.timedeltas(min_value=timedelta(minutes=1), max_value=timedelta(days=36_500))


@given(factors, weights)
def test_the_score_is_within_the_bounds_of_its_factors(f: Factors, w: dict[str, float]) -> None:
    score = retention_score(f, w)
    values = [f.importance, f.recency, f.scope, f.trust]
    used = [v for v, k in zip(values, FACTORS, strict=True) if w[k] > 0]
    assert 0.0 <= score <= 1.0
    assert min(used) - 1e-9 <= score <= max(used) + 1e-9


@given(factors, weights, st.sampled_from(FACTORS), unit)
def test_the_score_never_falls_when_a_factor_rises(
    f: Factors, w: dict[str, float], factor: str, other: float
) -> None:
    low, high = sorted((getattr(f, factor), other))
    below = Factors(**{**f.__dict__, factor: low})
    above = Factors(**{**f.__dict__, factor: high})
    assert retention_score(above, w) >= retention_score(below, w) - 1e-12
    if w[factor] >= 0.01 and high > low + 1e-3:  # a visible weight and step
        assert retention_score(above, w) > retention_score(below, w)


@given(moment, half_life, st.integers(min_value=0, max_value=8))
def test_recency_halves_at_each_half_life_exactly(
    memory_time: datetime, life: timedelta, n: int
) -> None:
    value = recency(
        snapshot=memory_time + n * life, last_access=None, memory_time=memory_time, half_life=life
    )
    assert value == pytest.approx(0.5**n, rel=1e-9)


@given(moment, moment, half_life)
def test_recency_counts_from_the_last_access_when_there_is_one(
    memory_time: datetime, accessed: datetime, life: timedelta
) -> None:
    snapshot = max(memory_time, accessed) + life
    value = recency(
        snapshot=snapshot, last_access=accessed, memory_time=memory_time, half_life=life
    )
    expected = 0.5 ** ((snapshot - accessed) / life)
    assert value == pytest.approx(expected, rel=1e-9)
    # a time after the snapshot is no age at all
    assert recency(
        snapshot=memory_time, last_access=None, memory_time=memory_time + life, half_life=life
    ) == pytest.approx(1.0)


@given(moment, half_life, st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)))
def test_recency_falls_with_age(memory_time: datetime, life: timedelta, more: timedelta) -> None:
    young = recency(snapshot=memory_time, last_access=None, memory_time=memory_time, half_life=life)
    old = recency(
        snapshot=memory_time + more, last_access=None, memory_time=memory_time, half_life=life
    )
    assert old <= young


activity = st.dictionaries(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from([None, "p", "q"])),
    st.integers(min_value=0, max_value=1000),
)


@given(activity, st.sampled_from(["a", "b", "c", "z"]), st.sampled_from([None, "p", "q"]))
def test_scope_nearness_is_bounded_and_highest_where_the_tenant_works(
    counts: dict[tuple[str, str | None], int], scope: str, project: str | None
) -> None:
    near = scope_nearness(counts, scope, project)
    assert 0.0 <= near <= 1.0
    if any(counts.values()):
        busiest = max(counts, key=lambda k: counts[k])
        assert scope_nearness(counts, *busiest) == 1.0
    else:
        assert near == 1.0  # nothing is far when nothing is near
    more = {**counts, (scope, project): counts.get((scope, project), 0) + 5}
    assert scope_nearness(more, scope, project) >= near


score = unit
policy_thresholds = st.tuples(unit, unit).map(sorted)


@given(score, unit, st.booleans(), st.booleans(), unit, policy_thresholds)
def test_pinned_and_important_memories_are_never_pruned(
    s: float,
    importance: float,
    pinned: bool,
    duplicate: bool,
    floor: float,
    thresholds: list[float],
) -> None:
    prune_below, fade_below = thresholds
    where = bucket(
        s,
        importance=importance,
        pinned=pinned,
        duplicate=duplicate,
        importance_floor=floor,
        fade_below=fade_below,
        prune_below=prune_below,
    )
    if pinned:
        assert where == "keep"
    if importance >= floor:
        assert where != "prune"
    if duplicate and not pinned and importance < floor:
        assert where == "prune"  # duplicates are forced into the prune path


@given(score, unit, policy_thresholds)
def test_buckets_follow_the_thresholds(
    s: float, importance: float, thresholds: list[float]
) -> None:
    prune_below, fade_below = thresholds
    where = bucket(
        s,
        importance=importance,
        pinned=False,
        duplicate=False,
        importance_floor=1.01,
        fade_below=fade_below,
        prune_below=prune_below,
    )
    assert where == ("prune" if s < prune_below else "fade" if s < fade_below else "keep")


@given(
    st.sampled_from(["fact", "preference", "decision", "blocker", "event", "note"]),
    st.sampled_from(["corroborated", "supported", "unsupported", "contested"]),
)
def test_the_heuristic_importance_weighs_decisions_and_blockers_above_notes_and_events(
    memory_type: str, grade: str
) -> None:
    scorer = HeuristicImportance()
    value = scorer.importance(ImportanceInput(memory_type, grade, pinned=False))
    assert 0.0 <= value <= 1.0
    for heavy in ("decision", "blocker"):
        for light in ("note", "event"):
            assert scorer.importance(ImportanceInput(heavy, grade, False)) > scorer.importance(
                ImportanceInput(light, grade, False)
            )
    assert scorer.importance(ImportanceInput(memory_type, grade, pinned=True)) == 1.0
    assert scorer.importance(ImportanceInput(memory_type, grade, False, explicit=0.3)) == 0.3


def test_no_unpinned_heuristic_importance_reaches_the_default_floor() -> None:
    # Otherwise the default policy could never prune a corroborated decision.
    scorer = HeuristicImportance()
    for memory_type in ("fact", "preference", "decision", "blocker", "event", "note"):
        for grade in ("corroborated", "supported", "unsupported", "contested"):
            value = scorer.importance(ImportanceInput(memory_type, grade, False))
            assert value < DEFAULT_POLICY.importance_floor


@pytest.mark.parametrize(
    "values",
    [
        {"weights": {"novelty": 1}},
        {"weights": {"trust": -1}},
        {"half_life_days": {"event": 0}},
        {"half_life_days": {"memo": 3}},
        {"schedule_minutes": 0},
        {"duplicate_floor": 1.5},
        {"enabled": "yes"},
        {"surprise": True},
        {"importance_floor": float("nan")},
    ],
)
def test_a_bad_policy_is_refused(values: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        ForgettingPolicy.checked(values)


def test_a_policy_keeps_the_defaults_it_does_not_override() -> None:
    policy = ForgettingPolicy.checked({"weights": {"trust": 1.0}}, version=3)
    assert policy.weights == {**DEFAULT_POLICY.weights, "trust": 1.0}
    assert policy.half_life_days == DEFAULT_POLICY.half_life_days
    assert policy.version == 3
    assert ForgettingPolicy.checked(policy.as_values(), version=3) == policy


@given(factors)
def test_all_zero_weights_are_the_unweighted_mean(f: Factors) -> None:
    zero = dict.fromkeys(FACTORS, 0.0)
    mean = (f.importance + f.recency + f.scope + f.trust) / 4
    assert retention_score(f, zero) == pytest.approx(mean)


@given(score, policy_thresholds)
def test_a_prune_threshold_at_or_above_the_fade_threshold_leaves_no_fade_band(
    s: float, thresholds: list[float]
) -> None:
    fade_below, prune_below = thresholds  # prune_below >= fade_below
    where = bucket(
        s,
        importance=0.0,
        pinned=False,
        duplicate=False,
        importance_floor=1.0,
        fade_below=fade_below,
        prune_below=prune_below,
    )
    assert where == ("prune" if s < prune_below else "keep")


texts = st.text(max_size=300)


@given(texts, st.text(min_size=1, max_size=30))
def test_information_is_bounded_and_never_falls_as_a_text_says_more(text: str, more: str) -> None:
    value = information(text)
    assert 0.0 <= value <= 1.0
    assert information(f"{text} {more}") >= value


def test_small_talk_carries_no_information_and_specifics_do() -> None:
    assert information("Thanks, you too!") == 0.0
    assert information("Wow, that's really great!") == 0.0
    specific = "The deploy of PAL-123 moved to 09:00 on Friday because the Berlin DB migrates."
    assert information(specific) > 0.5
    assert information("ok ok ok ok ok ok ok deploy") == information("deploy")


@given(
    st.sampled_from(["fact", "preference", "decision", "blocker", "event", "note"]),
    st.sampled_from(["corroborated", "supported", "unsupported", "contested"]),
    texts,
    texts,
)
def test_a_text_only_discounts_importance_and_the_more_informative_keeps_more(
    memory_type: str, grade: str, one: str, other: str
) -> None:
    scorer = HeuristicImportance()
    bare = scorer.importance(ImportanceInput(memory_type, grade, False))
    a = scorer.importance(ImportanceInput(memory_type, grade, False, text=one))
    b = scorer.importance(ImportanceInput(memory_type, grade, False, text=other))
    for value in (a, b):
        assert (1 - INFORMATION_SPREAD) * bare - 1e-12 <= value <= bare
        assert value < DEFAULT_POLICY.importance_floor
    if information(one) > information(other):
        assert a >= b
    # A pin and an explicit importance ignore the text.
    assert scorer.importance(ImportanceInput(memory_type, grade, True, text=one)) == 1.0
    assert scorer.importance(ImportanceInput(memory_type, grade, False, 0.7, text=one)) == 0.7
