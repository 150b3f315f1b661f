"""The retention score: whether a memory stays, fades or leaves (seed 004).

    score = (w_i * importance + w_r * recency + w_s * scope + w_t * trust)
            / (w_i + w_r + w_s + w_t)

a weighted arithmetic mean of four factors, each in [0, 1]:

- *importance*: :mod:`palimpsest.domain.importance`;
- *recency*: ``0.5 ** (Δt / half_life)`` with the type's half-life, Δt from
  the last access, else from the memory's time (the latest ``captured_at`` of
  its current version's evidence, else the version's own time), never
  negative (:func:`recency`);
- *scope*: nearness to where the tenant is working (:func:`scope_nearness`);
- *trust*: the belief's confidence: the grade's weight times the mean trust of
  its active support (:func:`palimpsest.domain.salience.confidence`).

Every score of one cycle is computed at one snapshot time, passed in: nothing
here reads a clock. :func:`bucket` turns a score into keep, fade or prune;
pinned memories and those at or above the importance floor are never pruned.

Pure: plain values in, floats and labels out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from palimpsest.domain.salience import decay

__all__ = [
    "Bucket",
    "Factors",
    "bucket",
    "recency",
    "retention_score",
    "scope_nearness",
]

Bucket = Literal["keep", "fade", "prune"]

SAME_SCOPE_SHARE = 0.5
"""How near a memory in the working scope but another project counts, at most."""


@dataclass(frozen=True)
class Factors:
    """The four factors of one memory's score, each in [0, 1]."""

    importance: float
    recency: float
    scope: float
    trust: float

    def __post_init__(self) -> None:
        for name in ("importance", "recency", "scope", "trust"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                msg = f"the {name} factor must be between 0 and 1, got {value}"
                raise ValueError(msg)


def retention_score(factors: Factors, weights: Mapping[str, float]) -> float:
    """Return the weighted arithmetic mean of the factors, in [0, 1] (all weights
    zero: the unweighted mean).

    Raises:
        ValueError: a weight below zero, or a factor without a weight.
    """
    values = {
        "importance": factors.importance,
        "recency": factors.recency,
        "scope": factors.scope,
        "trust": factors.trust,
    }
    if set(weights) != set(values) or any(w < 0 for w in weights.values()):
        msg = "weights need one value at or above zero per factor"
        raise ValueError(msg)
    total = sum(weights.values())
    if total <= 0:
        weights, total = dict.fromkeys(values, 1.0), float(len(values))
    mean = sum(weights[k] * v for k, v in values.items()) / total
    return min(1.0, max(0.0, mean))


def recency(
    *, snapshot: datetime, last_access: datetime | None, memory_time: datetime, half_life: timedelta
) -> float:
    """Return ``0.5 ** (Δt / half_life)``, Δt from the last access, else from the
    memory's time, to the snapshot (a time after the snapshot counts as Δt = 0).

    Raises:
        ValueError: the half-life is not positive.
    """
    since = last_access if last_access is not None else memory_time
    return decay(snapshot - since, half_life)


def scope_nearness(
    activity: Mapping[tuple[str, str | None], int], scope: str, project: str | None
) -> float:
    """Return how near (scope, project) is to where the tenant is working, in [0, 1].

    ``activity`` counts recent writes and recalls per (scope, project). The
    nearness is the larger of the pair's activity over the busiest pair's, and
    :data:`SAME_SCOPE_SHARE` times its scope's activity (all projects) over the
    busiest scope's. With no recent activity at all every memory is 1: nothing is
    far when nothing is near. (Scope *distance* is ``1 - nearness``.)

    Raises:
        ValueError: a negative count.
    """
    if any(n < 0 for n in activity.values()):
        msg = "activity counts cannot be negative"
        raise ValueError(msg)
    busiest = max(activity.values(), default=0)
    if busiest == 0:
        return 1.0
    by_scope: dict[str, int] = {}
    for (s, _), n in activity.items():
        by_scope[s] = by_scope.get(s, 0) + n
    exact = activity.get((scope, project), 0) / busiest
    wide = SAME_SCOPE_SHARE * by_scope.get(scope, 0) / max(by_scope.values())
    return min(1.0, max(exact, wide))


def bucket(
    score: float,
    *,
    importance: float,
    pinned: bool,
    duplicate: bool,
    importance_floor: float,
    fade_below: float,
    prune_below: float,
) -> Bucket:
    """Return where a scored memory goes.

    A pinned memory is kept. One at or above the importance floor is never pruned:
    it fades below ``fade_below`` and is kept otherwise. Any other memory prunes
    when it is a likely duplicate (the older side) or scores below
    ``prune_below``, fades below ``fade_below``, and is kept otherwise (so with
    ``prune_below`` at or above ``fade_below`` nothing fades but what is protected).
    """
    if pinned:
        return "keep"
    protected = importance >= importance_floor
    if not protected and (duplicate or score < prune_below):
        return "prune"
    if score < fade_below:
        return "fade"
    return "keep"
