"""The tenant's forgetting policy: how the decay cycle scores, buckets and evicts.

A tenant that never set one has :data:`DEFAULT_POLICY` (version 0): the cycle
off its schedule (it still runs when an administrator asks), hourly once
enabled, prune as proposals for review (``auto_archive_decayed`` off), and no
consolidation applied without review. Every field is documented in
docs/forgetting.md#policy; :meth:`ForgettingPolicy.checked` is the one place
that refuses a bad value, so a policy that exists is valid.

The consolidation fields (``merge_similarity_floor``,
``auto_apply_extractive_merges``, ``reflections_enabled``) are read by the
consolidation pass that runs after eviction.

Pure: plain values in and out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import timedelta
from types import MappingProxyType
from typing import Any

from palimpsest.domain.errors import InconsistentPolicyError, InvalidInputError
from palimpsest.domain.memory import MEMORY_TYPES

__all__ = [
    "DEFAULT_HALF_LIFE_DAYS",
    "DEFAULT_POLICY",
    "DEFAULT_WEIGHTS",
    "FACTORS",
    "ForgettingPolicy",
    "MAX_HALF_LIFE_DAYS",
]

FACTORS: tuple[str, ...] = ("importance", "recency", "scope", "trust")
"""The retention score's four factors, in the order weights are written."""

DEFAULT_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"importance": 0.35, "recency": 0.35, "scope": 0.1, "trust": 0.2}
)

DEFAULT_HALF_LIFE_DAYS: Mapping[str, float] = MappingProxyType(
    {
        "fact": 365.0,
        "preference": 365.0,
        "decision": 180.0,
        "blocker": 30.0,
        "note": 30.0,
        "event": 7.0,
    }
)
"""Seed 001: near-zero decay for stable facts and preferences, fast for episodic
events, the rest (decisions, blockers, notes: what a project is doing now) between."""

MAX_HALF_LIFE_DAYS = 36_500.0
_MIN_HALF_LIFE_DAYS = 0.01


def _weights() -> dict[str, float]:
    return dict(DEFAULT_WEIGHTS)


def _half_lives() -> dict[str, float]:
    return dict(DEFAULT_HALF_LIFE_DAYS)


@dataclass(frozen=True)
class ForgettingPolicy:
    """A tenant's forgetting policy (see the module docstring and docs/forgetting.md)."""

    enabled: bool = False
    """Whether the cycle runs on its schedule for this tenant."""
    schedule_minutes: int = 60
    """How often the scheduled cycle runs (1 to 10,080 minutes: a week)."""
    weights: dict[str, float] = field(default_factory=_weights)
    """The factors' weights (each ≥ 0); the score divides by their sum (all zero: an
    unweighted mean)."""
    half_life_days: dict[str, float] = field(default_factory=_half_lives)
    """Recency's half-life per memory type, in days."""
    importance_floor: float = 0.9
    """Memories whose importance is at or above it are never pruned."""
    fade_below: float = 0.45
    """A score below it fades (unless it prunes)."""
    prune_below: float = 0.35
    """A score below it prunes (at or above ``fade_below``, nothing fades)."""
    duplicate_floor: float = 0.95
    """Least cosine similarity at which two memories of one type, scope and project are
    likely duplicates: the older one is forced into the prune path."""
    auto_archive_decayed: bool = False
    """Prune archives directly (reason ``decayed``) instead of proposing."""
    activity_window_days: float = 14.0
    """How far back writes and recalls count as where the tenant is working."""
    merge_similarity_floor: float = 0.92
    """Consolidation: least similarity for memories to be merged."""
    auto_apply_extractive_merges: bool = False
    """Consolidation: extractive merges of near-duplicates apply without review."""
    reflections_enabled: bool = False
    """Consolidation: write reflections (needs a model)."""
    version: int = 0
    """How many times the tenant set its policy (0: the defaults, never set)."""

    @classmethod
    def checked(cls, values: Mapping[str, Any], *, version: int = 0) -> ForgettingPolicy:
        """Return the defaults overridden by ``values``, validated.

        ``weights`` and ``half_life_days`` may name only some factors or types: the
        others keep their defaults.

        Raises:
            InvalidInputError: an unknown field, factor or memory type; a value of
                the wrong kind or outside its range. (No rule ties two fields
                together, so the published schema says everything: see
                :func:`palimpsest.domain.retention_score.bucket` and
                :func:`~palimpsest.domain.retention_score.retention_score` for ``prune_below``
                above ``fade_below`` and all-zero weights.)
        """
        known = {f.name for f in fields(cls)} - {"version"}
        unknown = sorted(set(values) - known)
        if unknown:
            msg = f"unknown forgetting policy field(s): {', '.join(unknown)}"
            raise InvalidInputError(msg)
        base = cls()
        weights = {**base.weights, **_numbers("weights", values.get("weights", {}), FACTORS)}
        half_lives = {
            **base.half_life_days,
            **_numbers("half_life_days", values.get("half_life_days", {}), MEMORY_TYPES),
        }
        scalars = {k: v for k, v in values.items() if k not in ("weights", "half_life_days")}
        policy = replace(base, **scalars, weights=weights, half_life_days=half_lives)
        policy = replace(policy, version=version)
        policy._validate()
        return policy

    def _validate(self) -> None:
        for name in ("enabled", "auto_archive_decayed", "auto_apply_extractive_merges"):
            _boolean(name, getattr(self, name))
        _boolean("reflections_enabled", self.reflections_enabled)
        if isinstance(self.schedule_minutes, bool) or not isinstance(self.schedule_minutes, int):
            msg = "schedule_minutes must be an integer"
            raise InvalidInputError(msg)
        _within("schedule_minutes", self.schedule_minutes, 1, 10_080)
        for name in (
            "importance_floor",
            "fade_below",
            "prune_below",
            "duplicate_floor",
            "merge_similarity_floor",
        ):
            _within(name, getattr(self, name), 0.0, 1.0)
        _within("activity_window_days", self.activity_window_days, 1 / 24, 3650.0)
        for factor, weight in self.weights.items():
            _within(f"weights.{factor}", weight, 0.0, 1000.0)
        for memory_type, days in self.half_life_days.items():
            _within(f"half_life_days.{memory_type}", days, _MIN_HALF_LIFE_DAYS, MAX_HALF_LIFE_DAYS)

    def merged(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Return this policy's values with ``changes`` over them (a partial update):
        ``weights`` and ``half_life_days`` merge key by key, every field not named
        keeps its value. Unchecked: pass the result to :meth:`checked`."""
        values = self.as_values()
        for name in ("weights", "half_life_days"):
            given = changes.get(name, {})
            if isinstance(given, Mapping):
                values[name] = {**values[name], **given}
            else:  # left for ``checked`` to refuse with the field's name
                values[name] = given
        values.update((k, v) for k, v in changes.items() if k not in ("weights", "half_life_days"))
        return values

    def require_consistent(self) -> ForgettingPolicy:
        """Return the policy if its fields agree with each other.

        Checked when a policy is set, not when a stored one is read: a policy
        recorded before the rule existed still loads (the cycle's buckets read
        ``prune_below`` first, so it only fades nothing).

        Raises:
            InconsistentPolicyError: ``prune_below`` is above ``fade_below``, so every
                memory that would fade prunes instead and nothing ever fades.
        """
        if self.prune_below > self.fade_below:
            msg = (
                f"prune_below ({self.prune_below:g}) is above fade_below ({self.fade_below:g}):"
                " every memory that should fade would prune; set prune_below at or below"
                " fade_below"
            )
            raise InconsistentPolicyError(msg)
        return self

    def half_life(self, memory_type: str) -> timedelta:
        """Return recency's half-life for ``memory_type``."""
        return timedelta(days=self.half_life_days[memory_type])

    def as_values(self) -> dict[str, Any]:
        """Return the policy as the JSON values an event stores (without its version)."""
        values = asdict(self)
        values.pop("version")
        return values


def _boolean(name: str, value: object) -> None:
    if not isinstance(value, bool):
        msg = f"{name} must be true or false"
        raise InvalidInputError(msg)


def _within(name: str, value: object, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{name} must be a number"
        raise InvalidInputError(msg)
    if not math.isfinite(value) or not low <= value <= high:
        msg = f"{name} must be between {low:g} and {high:g}, got {value}"
        raise InvalidInputError(msg)


def _numbers(name: str, given: object, allowed: tuple[str, ...]) -> dict[str, float]:
    if not isinstance(given, Mapping):
        msg = f"{name} must be an object"
        raise InvalidInputError(msg)
    unknown = sorted(str(k) for k in given if k not in allowed)
    if unknown:
        msg = f"{name} has unknown key(s) {', '.join(unknown)} (one of {', '.join(allowed)})"
        raise InvalidInputError(msg)
    for key, value in given.items():
        _within(f"{name}.{key}", value, -math.inf, math.inf)
    return {str(k): float(v) for k, v in given.items()}


DEFAULT_POLICY = ForgettingPolicy()
"""The policy of a tenant that never set one."""
