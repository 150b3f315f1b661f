"""``/v1/cycles`` and ``/v1/tenant/forgetting``: the decay cycle and its policy."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from pydantic import BaseModel, Field

from palimpsest.api.schemas._common import JsonInt, JsonScheduleMinutes, RequestBody
from palimpsest.domain.forgetting_policy import (
    DEFAULT_HALF_LIFE_DAYS,
    DEFAULT_POLICY,
    DEFAULT_WEIGHTS,
    MAX_HALF_LIFE_DAYS,
)

__all__ = [
    "CycleCreate",
    "CyclePublic",
    "ForgettingPolicyPatch",
    "ForgettingPolicyPublic",
    "ForgettingPolicyUpdate",
    "HalfLives",
    "HalfLivesPatch",
    "Weights",
    "WeightsPatch",
]

Unit = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
Weight = Annotated[float, Field(ge=0.0, le=1000.0, strict=True)]
Days = Annotated[float, Field(ge=0.01, le=MAX_HALF_LIFE_DAYS, strict=True)]


class Weights(RequestBody):
    """The retention score's weights (each ≥ 0; the score divides by their sum, and
    with all zero is the unweighted mean)."""

    importance: Weight = DEFAULT_WEIGHTS["importance"]
    recency: Weight = DEFAULT_WEIGHTS["recency"]
    scope: Weight = DEFAULT_WEIGHTS["scope"]
    trust: Weight = DEFAULT_WEIGHTS["trust"]


class HalfLives(RequestBody):
    """Recency's half-life per memory type, in days."""

    fact: Days = DEFAULT_HALF_LIFE_DAYS["fact"]
    preference: Days = DEFAULT_HALF_LIFE_DAYS["preference"]
    decision: Days = DEFAULT_HALF_LIFE_DAYS["decision"]
    blocker: Days = DEFAULT_HALF_LIFE_DAYS["blocker"]
    note: Days = DEFAULT_HALF_LIFE_DAYS["note"]
    event: Days = DEFAULT_HALF_LIFE_DAYS["event"]


class ForgettingPolicyUpdate(RequestBody):
    """The tenant's whole forgetting policy: a field left out takes its default (not
    its previous value). See docs/forgetting.md#policy."""

    enabled: bool = Field(default=DEFAULT_POLICY.enabled, strict=True)
    schedule_minutes: JsonInt = Field(default=DEFAULT_POLICY.schedule_minutes, ge=1, le=10_080)
    weights: Weights = Field(default_factory=Weights)
    half_life_days: HalfLives = Field(default_factory=HalfLives)
    importance_floor: Unit = DEFAULT_POLICY.importance_floor
    fade_below: Unit = DEFAULT_POLICY.fade_below
    prune_below: Unit = Field(
        default=DEFAULT_POLICY.prune_below,
        ge=0.0,
        le=1.0,
        strict=True,
        description="Below it a memory prunes; at or above fade_below, nothing fades.",
    )
    duplicate_floor: Unit = DEFAULT_POLICY.duplicate_floor
    auto_archive_decayed: bool = Field(default=DEFAULT_POLICY.auto_archive_decayed, strict=True)
    activity_window_days: float = Field(
        default=DEFAULT_POLICY.activity_window_days, ge=1 / 24, le=3650.0, strict=True
    )
    merge_similarity_floor: Unit = DEFAULT_POLICY.merge_similarity_floor
    auto_apply_extractive_merges: bool = Field(
        default=DEFAULT_POLICY.auto_apply_extractive_merges, strict=True
    )
    reflections_enabled: bool = Field(default=DEFAULT_POLICY.reflections_enabled, strict=True)


class WeightsPatch(RequestBody):
    """Weights to change; a factor left out keeps its current weight."""

    importance: Weight | None = None
    recency: Weight | None = None
    scope: Weight | None = None
    trust: Weight | None = None


class HalfLivesPatch(RequestBody):
    """Half-lives to change, in days; a type left out keeps its current half-life."""

    fact: Days | None = None
    preference: Days | None = None
    decision: Days | None = None
    blocker: Days | None = None
    note: Days | None = None
    event: Days | None = None


class ForgettingPolicyPatch(RequestBody):
    """Fields of the forgetting policy to change: every field left out (and every
    weight or half-life left out) keeps its current value. See
    docs/forgetting.md#policy."""

    enabled: bool | None = Field(default=None, strict=True)
    schedule_minutes: JsonScheduleMinutes | None = None
    weights: WeightsPatch | None = None
    half_life_days: HalfLivesPatch | None = None
    importance_floor: Unit | None = None
    fade_below: Unit | None = None
    prune_below: Unit | None = None
    duplicate_floor: Unit | None = None
    auto_archive_decayed: bool | None = Field(default=None, strict=True)
    activity_window_days: float | None = Field(default=None, ge=1 / 24, le=3650.0, strict=True)
    merge_similarity_floor: Unit | None = None
    auto_apply_extractive_merges: bool | None = Field(default=None, strict=True)
    reflections_enabled: bool | None = Field(default=None, strict=True)


class ForgettingPolicyPublic(BaseModel):
    """The tenant's forgetting policy (the defaults, version 0, until one is set)."""

    enabled: bool
    schedule_minutes: int
    weights: dict[str, float]
    half_life_days: dict[str, float]
    importance_floor: float
    fade_below: float
    prune_below: float
    duplicate_floor: float
    auto_archive_decayed: bool
    activity_window_days: float
    merge_similarity_floor: float
    auto_apply_extractive_merges: bool
    reflections_enabled: bool
    version: int = Field(description="How many times the policy was set (0: the defaults).")


class CycleCreate(RequestBody):
    """Run the decay cycle over the caller's tenant now."""

    dry_run: bool = Field(
        default=False,
        strict=True,
        description="Score and bucket, and return the report with every memory's score; "
        "write nothing.",
    )


class CyclePublic(BaseModel):
    """One decay cycle's report."""

    cycle_id: UUID
    dry_run: bool
    snapshot_at: datetime = Field(description="The one time every score was computed at.")
    policy_version: int
    counts: dict[str, int] = Field(description="Memories per bucket: keep, fade, prune.")
    by_type: dict[str, dict[str, int]] = Field(description="Counts per bucket, per type.")
    duplicates: list[dict[str, Any]] = Field(
        description="Likely duplicates forced into the prune path: older, newer, similarity."
    )
    faded: list[str]
    unfaded: list[str] = Field(description="Memories a previous cycle faded, kept now.")
    proposals: list[str] = Field(description="Proposals created (the review queue).")
    archived: list[str] = Field(description="Memories archived, reason `decayed`.")
    held_back: int | None = Field(
        default=None,
        description="Prunes proposed instead of archived: the collapse guard was reached "
        "(absent from cycles recorded before it was).",
    )
    importance_fallbacks: int | None = Field(
        default=None,
        description="Scores whose importance is the heuristic's because the model scorer "
        "could not rate the memory (it failed, or answered no rating); with any, the cycle "
        "archived nothing itself and proposed its prunes (absent from cycles recorded before "
        "it was).",
    )
    scores: list[dict[str, Any]] | None = Field(
        default=None, description="Every memory's factors, score and bucket (dry runs)."
    )
    consolidation: dict[str, Any] | None = Field(
        default=None,
        description="What consolidating the survivors did: groups, proposed, merged, "
        "already_open, held_back, reflections, summariser, failures (or failed, or "
        "skipped). Absent from a dry run, and from a recorded cycle until it is recorded.",
    )
    memories: dict[str, dict[str, Any]] = Field(
        description="Every memory the report names, by id: its type, scope, project, topic, "
        "text (cut to 160 characters; null once erased) and whether it is archived now.",
    )
    proposed: list[dict[str, Any]] = Field(
        description="Each proposal created: proposal_id, memory_id, action."
    )
    factors_explained: dict[str, str] = Field(description="What each factor of a score says.")
    buckets_explained: dict[str, str] = Field(description="What keep, fade and prune mean.")
