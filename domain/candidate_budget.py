"""Whether a write spends its short budget waiting for its contradiction candidates.

A write of a paired type may wait ``PALIMPSEST_CANDIDATE_BUDGET_MS`` for its new
version to be embedded, so that its answer lists the candidates at once. That
pays only when embedding is faster than the budget. With a slower embedder (the
local model takes 7-15 ms a text here) or none reachable, every such write would
wait the whole budget for nothing, and a writer that writes one version after
another would write at a fraction of the write path's speed. So the process
counts how its recent waits ended: after :data:`MISSES_TO_STOP` waits in a row
that ended pending, writes answer pending at once, and one write in
:data:`PROBE_EVERY` waits again, to notice an embedder that became fast. A wait
that ends ready resets the count.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BudgetOdds",
    "MISSES_TO_STOP",
    "PROBE_EVERY",
    "after_probe",
    "after_skip",
    "after_wait",
    "worth_waiting",
]

MISSES_TO_STOP = 4
"""Waits in a row that ended pending before writes stop waiting."""
PROBE_EVERY = 16
"""Once they stopped, one write in this many waits again."""


@dataclass(frozen=True)
class BudgetOdds:
    """How a process's recent waits for candidates ended."""

    misses: int = 0
    """Waits in a row that ended pending."""
    skipped: int = 0
    """Writes answered at once since the last wait."""


def worth_waiting(odds: BudgetOdds) -> bool:
    """Return whether the next write should wait its budget: while fewer than
    :data:`MISSES_TO_STOP` waits in a row missed, or as the probe that follows
    ``PROBE_EVERY - 1`` writes answered at once."""
    return odds.misses < MISSES_TO_STOP or odds.skipped >= PROBE_EVERY - 1


def after_probe(odds: BudgetOdds) -> BudgetOdds:
    """Return the odds once a probe was granted (:func:`worth_waiting` held only
    because enough writes were answered at once): the count of those starts again
    at once, so that writes arriving while the probe waits do not probe too."""
    return BudgetOdds(misses=odds.misses) if odds.misses >= MISSES_TO_STOP else odds


def after_wait(odds: BudgetOdds, ready: bool) -> BudgetOdds:
    """Return the odds after a write waited and its candidates were ``ready`` or not."""
    return BudgetOdds() if ready else BudgetOdds(misses=odds.misses + 1)


def after_skip(odds: BudgetOdds) -> BudgetOdds:
    """Return the odds after a write answered at once, without waiting."""
    return BudgetOdds(misses=odds.misses, skipped=odds.skipped + 1)
