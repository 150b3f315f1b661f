"""Scoring a tenant's memories for the decay cycle, bucketing them, and planning the
prunes (:mod:`palimpsest.projections.drains.decay_cycle` records what this decides).

Everything here is computed from inputs already read, at the cycle's one snapshot
time: no reads, no writes. The score and bucket rules are the domain's
(:mod:`palimpsest.domain.retention_score`); this is where a cycle applies them to
its memories, with the importance scorer the cycle was given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from palimpsest.domain.forgetting_policy import ForgettingPolicy
from palimpsest.domain.importance import ImportanceInput, ImportanceScorer
from palimpsest.domain.memory import MEMORY_TYPES
from palimpsest.domain.retention_score import Bucket, Factors, bucket, recency, retention_score
from palimpsest.domain.retention_score import scope_nearness as nearness
from palimpsest.projections.commands.cycle import Prune
from palimpsest.projections.views.decay_inputs import DecayInput

__all__ = [
    "BUCKETS",
    "Scored",
    "bucket_counts",
    "forced_duplicates",
    "plan_prunes",
    "score_memories",
    "score_rows",
]

BUCKETS: tuple[Bucket, ...] = ("keep", "fade", "prune")


@dataclass(frozen=True)
class Scored:
    """One memory as the cycle scored and bucketed it."""

    memory: DecayInput
    factors: Factors
    score: float
    bucket: Bucket
    duplicate_of: UUID | None
    similarity: float | None
    fallback: bool = False
    """Whether the importance fell back to the heuristic (a model that failed)."""


def forced_duplicates(pairs: Sequence[Any]) -> dict[UUID, tuple[UUID, float]]:
    """The older side of each likely duplicate, with its most similar newer one."""
    forced: dict[UUID, tuple[UUID, float]] = {}
    for pair in pairs:  # most similar first
        forced.setdefault(pair.older, (pair.newer, pair.similarity))
    return forced


def score_memories(
    memories: Sequence[DecayInput],
    policy: ForgettingPolicy,
    *,
    snapshot: datetime,
    activity: dict[tuple[str, str | None], int],
    forced: dict[UUID, tuple[UUID, float]],
    scorer: ImportanceScorer,
    texts: Mapping[UUID, str | None],
) -> list[Scored]:
    """Score and bucket every memory at ``snapshot`` (pure given its inputs;
    ``texts``: each memory's current text, for the importance scorer)."""
    scored = []
    for memory in memories:
        assessed = scorer.assess(
            ImportanceInput(
                memory.memory_type,
                memory.grade,
                memory.pinned,
                explicit=memory.importance,
                text=texts.get(memory.memory_id),
            )
        )
        importance = assessed.value
        assert memory.time is not None
        factors = Factors(
            importance=importance,
            recency=recency(
                snapshot=snapshot,
                last_access=memory.last_access,
                memory_time=memory.time,
                half_life=policy.half_life(memory.memory_type),
            ),
            scope=nearness(activity, memory.scope, memory.project),
            trust=memory.confidence,
        )
        score = retention_score(factors, policy.weights)
        duplicate = forced.get(memory.memory_id)
        where = bucket(
            score,
            importance=importance,
            pinned=memory.pinned,
            duplicate=duplicate is not None,
            importance_floor=policy.importance_floor,
            fade_below=policy.fade_below,
            prune_below=policy.prune_below,
        )
        scored.append(
            Scored(
                memory,
                factors,
                score,
                where,
                duplicate[0] if duplicate and where == "prune" else None,
                duplicate[1] if duplicate and where == "prune" else None,
                assessed.fallback,
            )
        )
    return scored


def plan_prunes(
    scored: list[Scored],
    automatic: bool,
    allowed: int,
) -> tuple[list[Prune], int]:
    """The prunes, forced duplicates first then lowest score first; archived directly
    (``automatic``, and not an event) while the guard's ``allowed`` memories last.
    Returns them and how many the guard held back."""
    pruned = sorted(
        (s for s in scored if s.bucket == "prune"),
        key=lambda s: (s.duplicate_of is None, s.score, str(s.memory.memory_id)),
    )
    prunes, held = [], 0
    for s in pruned:
        archive = automatic and s.memory.memory_type != "event"
        if archive and allowed <= 0:
            archive, held = False, held + 1
        elif archive:
            allowed -= 1
        prunes.append(
            Prune(
                s.memory.memory_id,
                s.memory.version_id,
                round(s.score, 6),
                archive,
                s.duplicate_of,
                s.similarity,
                s.factors,
            )
        )
    return prunes, held


def bucket_counts(scored: list[Scored]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    counts: dict[str, int] = dict.fromkeys(BUCKETS, 0)
    by_type: dict[str, dict[str, int]] = {t: dict.fromkeys(BUCKETS, 0) for t in MEMORY_TYPES}
    for s in scored:
        counts[s.bucket] += 1
        by_type.setdefault(s.memory.memory_type, dict.fromkeys(BUCKETS, 0))[s.bucket] += 1
    return counts, {t: c for t, c in by_type.items() if any(c.values())}


def score_rows(scored: list[Scored]) -> list[dict[str, Any]]:
    return [
        {
            "memory_id": str(s.memory.memory_id),
            "memory_type": s.memory.memory_type,
            "bucket": s.bucket,
            "score": round(s.score, 6),
            "factors": asdict(s.factors),
            "duplicate_of": None if s.duplicate_of is None else str(s.duplicate_of),
        }
        for s in scored
    ]
