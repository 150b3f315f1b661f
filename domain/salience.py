"""Salience: how prominently a memory ranks. Demotion changes rank, nothing else.

salience = base * decay(Δt) * (1 + ln(1 + accesses)) * pin_boost

- ``base`` is the memory's confidence: a weight per grade (corroborated 1.0,
  supported 0.8, unsupported 0.4, contested 0.3) times the mean trust of its
  active support (1.0 when it has none, so an unsupported memory is not
  punished twice);
- ``decay(Δt) = 0.5 ** (Δt / half_life)``, with a half-life per memory type
  (:data:`DEFAULT_HALF_LIVES`: slow for facts, decisions and preferences,
  fast for events and notes), and Δt measured from the last access, or else
  from when the memory was first recorded (never negative);
- ``accesses`` counts reads that returned the memory (tuning state, never an
  event);
- ``pin_boost`` is :data:`PIN_BOOST` while pinned, else 1: large enough that
  a pinned memory outranks every unpinned one within
  :data:`DOMINANCE_HORIZON_HALF_LIVES` half-lives and
  :data:`DOMINANCE_MAX_ACCESSES` accesses.

Reads expose a *score* instead of the raw value, which grows without bound
with accesses and is in the tens of billions while pinned:
``score = s / (1 + s)``, where ``s`` is the salience without the pin boost
(:func:`score`). It lies in ``[0, 1]``, rises and falls with ``s`` (so with
confidence and accesses, and decays with time), and is 0.5 at ``s = 1`` (a
corroborated memory of full trust, just recorded, never read). Pinning is
reported as the belief's ``pinned`` label, not folded into the score;
ranking still uses the full formula, so a pinned memory outranks every
unpinned one whatever their scores.

Pure: plain values in, a float out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta

__all__ = [
    "DEFAULT_HALF_LIVES",
    "DOMINANCE_HORIZON_HALF_LIVES",
    "DOMINANCE_MAX_ACCESSES",
    "GRADE_WEIGHTS",
    "PIN_BOOST",
    "confidence",
    "decay",
    "salience",
    "score",
]

GRADE_WEIGHTS: Mapping[str, float] = {
    "corroborated": 1.0,
    "supported": 0.8,
    "unsupported": 0.4,
    "contested": 0.3,
}

DEFAULT_HALF_LIVES: Mapping[str, timedelta] = {
    "fact": timedelta(days=365),
    "decision": timedelta(days=365),
    "preference": timedelta(days=180),
    "blocker": timedelta(days=30),
    "note": timedelta(days=14),
    "event": timedelta(days=7),
}

DOMINANCE_HORIZON_HALF_LIVES = 20
DOMINANCE_MAX_ACCESSES = 10**9
PIN_BOOST = (
    2
    * (1 + math.log(1 + DOMINANCE_MAX_ACCESSES))
    * 2.0**DOMINANCE_HORIZON_HALF_LIVES
    / (min(GRADE_WEIGHTS.values()) * 0.01)
)
"""Twice what it takes for the worst pinned case (lowest grade, mean trust 0.01,
no access, at the horizon) to match the best unpinned one (base 1, just read,
the maximum accesses)."""


def confidence(grade: str, trusts: list[float]) -> float:
    """Return the base of salience: the grade's weight times the mean trust of the
    active support (1.0 without support).

    Raises:
        ValueError: an unknown grade, or a trust outside ``[0, 1]``.
    """
    if grade not in GRADE_WEIGHTS:
        msg = f"unknown grade {grade!r}"
        raise ValueError(msg)
    if any(not 0.0 <= t <= 1.0 for t in trusts):
        msg = "trust must be between 0 and 1"
        raise ValueError(msg)
    mean = sum(trusts) / len(trusts) if trusts else 1.0
    return GRADE_WEIGHTS[grade] * mean


def decay(elapsed: timedelta, half_life: timedelta) -> float:
    """Return ``0.5 ** (elapsed / half_life)``; elapsed time below zero counts as zero.

    Raises:
        ValueError: the half-life is not positive.
    """
    if half_life <= timedelta(0):
        msg = "a half-life must be positive"
        raise ValueError(msg)
    return float(0.5 ** (max(elapsed, timedelta(0)) / half_life))


def salience(
    *,
    base: float,
    memory_type: str,
    first_recorded: datetime,
    last_access: datetime | None,
    accesses: int,
    pinned: bool,
    now: datetime,
    half_lives: Mapping[str, timedelta] = DEFAULT_HALF_LIVES,
) -> float:
    """Return the memory's salience at ``now`` (see the module docstring).

    Raises:
        ValueError: ``base`` outside ``[0, 1]``, negative ``accesses``, or a type
            without a half-life.
    """
    if not 0.0 <= base <= 1.0:
        msg = "base must be between 0 and 1"
        raise ValueError(msg)
    if accesses < 0:
        msg = "accesses cannot be negative"
        raise ValueError(msg)
    if memory_type not in half_lives:
        msg = f"no half-life for memory type {memory_type!r}"
        raise ValueError(msg)
    since = last_access if last_access is not None else first_recorded
    value = base * decay(now - since, half_lives[memory_type]) * (1 + math.log1p(accesses))
    return value * (PIN_BOOST if pinned else 1.0)


def score(unpinned: float) -> float:
    """Return the bounded score of a salience computed without the pin boost:
    ``s / (1 + s)``, in ``[0, 1]`` and non-decreasing in ``s``.

    Raises:
        ValueError: a negative salience.
    """
    if not unpinned >= 0.0:
        msg = "salience cannot be negative"
        raise ValueError(msg)
    if math.isinf(unpinned):
        return 1.0
    return unpinned / (1.0 + unpinned)
