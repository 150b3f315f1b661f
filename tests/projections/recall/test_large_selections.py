"""Selections counted large are taken as large for a while, then counted again."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from palimpsest.projections.recall._large_selections import LargeSelections


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_large_count_holds_for_its_seconds_and_a_small_one_is_never_remembered() -> None:
    clock = _Clock()
    selections = LargeSelections(seconds=10.0, clock=clock)
    assert not selections.large("t")  # never counted: count it
    selections.counted("t", large=True)
    clock.now += 9.9
    assert selections.large("t")
    clock.now += 0.1
    assert not selections.large("t")  # its time is up: count again
    selections.counted("t", large=True)
    selections.counted("t", large=False)  # counted small since: forgotten at once
    assert not selections.large("t")
    selections.counted("u", large=False)
    assert not selections.large("u")


def test_the_least_recently_counted_go_first_beyond_the_size() -> None:
    selections = LargeSelections(size=2, clock=_Clock())
    for key in ("a", "b", "a", "c"):  # "a" counted again after "b"
        selections.counted(key, large=True)
    assert [selections.large(k) for k in ("a", "b", "c")] == [True, False, True]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["count", "ask", "wait"]),
            st.sampled_from(["a", "b", "c", "d"]),
            st.booleans(),
            st.floats(0, 6),
        ),
        max_size=40,
    )
)
def test_large_is_exactly_a_large_count_within_the_seconds_among_the_size_newest(
    steps: list[tuple[str, str, bool, float]],
) -> None:
    clock = _Clock()
    selections = LargeSelections(seconds=5.0, size=3, clock=clock)
    model: dict[str, float] = {}  # the key's last large count, in counting order
    for action, key, large, seconds in steps:
        if action == "wait":
            clock.now += seconds
        elif action == "count":
            selections.counted(key, large=large)
            model.pop(key, None)
            if large:
                model[key] = clock.now
                while len(model) > 3:
                    del model[next(iter(model))]
        else:
            expected = key in model and clock.now - model[key] < 5.0
            assert selections.large(key) == expected
            if key in model and not expected:
                del model[key]
