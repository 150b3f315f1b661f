"""A serving process's budget for a write's contradiction candidates, spent only
while it pays (the policy: :mod:`palimpsest.domain.candidate_budget`)."""

from __future__ import annotations

from palimpsest.domain.candidate_budget import (
    BudgetOdds,
    after_probe,
    after_skip,
    after_wait,
    worth_waiting,
)

__all__ = ["CandidateBudget"]


class CandidateBudget:
    """``PALIMPSEST_CANDIDATE_BUDGET_MS`` and how this process's recent waits ended.

    Used on the event loop only (the routes' async part), so it needs no lock.
    """

    def __init__(self, budget_s: float) -> None:
        self.budget_s = budget_s
        self._odds = BudgetOdds()

    def take(self) -> float:
        """Return how long the next write may wait for its candidates: the budget
        while waiting pays, else 0 (and the write counts as answered at once)."""
        if self.budget_s <= 0:
            return 0.0
        if worth_waiting(self._odds):
            self._odds = after_probe(self._odds)
            return self.budget_s
        self._odds = after_skip(self._odds)
        return 0.0

    def settle(self, ready: bool) -> None:
        """Record how a wait granted by :meth:`take` ended (call it only for a write
        that did wait: one whose first look was already ready says nothing of the
        embedder's speed)."""
        self._odds = after_wait(self._odds, ready)
