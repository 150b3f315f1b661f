"""When a write spends its short budget waiting for its contradiction candidates."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.candidate_budget import (
    MISSES_TO_STOP,
    PROBE_EVERY,
    BudgetOdds,
    after_probe,
    after_skip,
    after_wait,
    worth_waiting,
)


def _run(outcomes: list[bool]) -> list[bool]:
    """Write once per outcome (the outcome of a wait, if the write waits); return
    which writes waited."""
    odds, waited = BudgetOdds(), []
    pending = iter(outcomes)
    for _ in outcomes:
        if worth_waiting(odds):
            odds = after_wait(after_probe(odds), next(pending))
            waited.append(True)
        else:
            odds = after_skip(odds)
            waited.append(False)
    return waited


def test_a_process_waits_until_its_waits_keep_missing_then_probes() -> None:
    # Every wait ends pending: the first MISSES_TO_STOP wait, then one in PROBE_EVERY.
    waited = _run([False] * (MISSES_TO_STOP + 3 * PROBE_EVERY))
    assert waited[:MISSES_TO_STOP] == [True] * MISSES_TO_STOP
    probes = waited[MISSES_TO_STOP:]
    assert probes == ([False] * (PROBE_EVERY - 1) + [True]) * 3


def test_a_wait_that_pays_brings_the_budget_back() -> None:
    odds = BudgetOdds()
    for _ in range(MISSES_TO_STOP):
        odds = after_wait(odds, ready=False)
    assert not worth_waiting(odds)
    for _ in range(PROBE_EVERY - 1):
        odds = after_skip(odds)
    assert worth_waiting(odds)  # the probe
    odds = after_wait(odds, ready=True)
    assert odds == BudgetOdds()
    assert all(_run([False] * MISSES_TO_STOP))  # waiting again, as a fresh process


def test_a_probe_is_counted_when_granted_so_writes_meanwhile_do_not_probe_too() -> None:
    stopped = BudgetOdds(misses=MISSES_TO_STOP, skipped=PROBE_EVERY - 1)
    assert worth_waiting(stopped)
    granted = after_probe(stopped)
    assert not worth_waiting(granted)  # a second write, while the probe still waits
    assert after_probe(BudgetOdds(misses=1, skipped=3)) == BudgetOdds(misses=1, skipped=3)


def test_waits_that_pay_never_stop() -> None:
    assert all(_run([True] * 100))


@given(st.lists(st.booleans(), max_size=400))
def test_a_process_never_answers_at_once_more_than_probe_every_minus_one_in_a_row(
    outcomes: list[bool],
) -> None:
    waited = _run(outcomes)
    run = longest = 0
    for w in waited:
        run = 0 if w else run + 1
        longest = max(longest, run)
    assert longest <= PROBE_EVERY - 1
    # And it only stops after MISSES_TO_STOP waits in a row that missed.
    pending = iter(outcomes)
    misses = 0
    for w in waited:
        if not w:
            assert misses >= MISSES_TO_STOP
            continue
        misses = 0 if next(pending) else misses + 1
