"""Consolidation's pure parts: which similar memories merge, and whose text is kept.

Pass 1 of consolidation (seed 004) folds groups of similar current memories
into one consolidated memory. Groups form only within one type, scope and
project, never of ``event`` memories (episodes are never superseded), and
only over pairs at or above the tenant's merge similarity floor.

Grouping is a *star* around a centre, not a chain: members are taken in the
extractive order (best-supported first, then newest, then by id), each one
not yet grouped becomes a centre, and it gathers every ungrouped member of
its kind whose similarity *to it* reaches the floor. So every member of a
group is similar to the centre (a chain a~b~c would fold ``a`` into ``c``
through ``b`` though ``a`` and ``c`` differ), the centre is the member the
extractive summariser keeps verbatim, and the result does not depend on the
order the pairs were found in.

A group is an exact-or-near duplicate when every member is byte-identical to
the centre or at least :data:`NEAR_DUPLICATE_SIMILARITY` similar to it: only
such a group, summarised extractively, may be applied without a person when
the tenant's policy allows it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from palimpsest.domain.evidence import Excerpt

__all__ = [
    "MAX_GROUP",
    "MergeGroup",
    "MergeMember",
    "NEAR_DUPLICATE_SIMILARITY",
    "extractive_order",
    "merge_groups",
    "union_excerpts",
]

NEAR_DUPLICATE_SIMILARITY = 0.97
"""The least cosine similarity to the centre at which a member counts as a near
duplicate (same text up to a word or two, for the embedders used here)."""

MAX_GROUP = 12
"""The most memories folded into one: a bigger group is more likely a topic than a
duplicate, and its text would not fit a summary."""


@dataclass(frozen=True)
class MergeMember:
    """A current memory as consolidation sees it."""

    memory_id: UUID
    memory_type: str
    scope: str
    project: str | None
    support: int
    """How many distinct observations actively support its current version."""
    recorded_at: datetime
    """When its current version was recorded."""
    content_digest: str

    @property
    def kind(self) -> tuple[str, str, str | None]:
        """What must be equal for two memories to merge: type, scope and project."""
        return (self.memory_type, self.scope, self.project)


@dataclass(frozen=True)
class MergeGroup:
    """Memories to fold into one: the centre first, then the others in extractive order."""

    members: tuple[MergeMember, ...]
    near_duplicate: bool
    """Every member is the centre's bytes, or near-duplicate similar to it."""

    @property
    def centre(self) -> MergeMember:
        """The best-supported, then newest member: the extractive summary's text."""
        return self.members[0]

    @property
    def memory_ids(self) -> tuple[UUID, ...]:
        """The members' ids, centre first."""
        return tuple(m.memory_id for m in self.members)


def extractive_order(members: Iterable[MergeMember]) -> list[MergeMember]:
    """Return ``members`` best-supported first, then newest, then by id (a total order,
    so the choice never depends on the input's order)."""
    return sorted(members, key=lambda m: (-m.support, -m.recorded_at.timestamp(), str(m.memory_id)))


def _pair(a: UUID, b: UUID) -> tuple[UUID, UUID]:
    return (a, b) if str(a) < str(b) else (b, a)


def merge_groups(
    members: Iterable[MergeMember],
    similarities: Mapping[tuple[UUID, UUID], float],
    floor: float,
    *,
    max_group: int = MAX_GROUP,
) -> list[MergeGroup]:
    """Return the groups of two or more members to merge (see the module).

    ``similarities`` maps a pair of memory ids, in either order, to their cosine
    similarity; a pair not in it is not similar. ``event`` memories, and pairs
    of different type, scope or project, never group whatever their similarity.
    """
    ordered = [m for m in extractive_order(members) if m.memory_type != "event"]
    similar: dict[tuple[UUID, UUID], float] = {}
    for (a, b), value in similarities.items():
        key = _pair(a, b)
        similar[key] = max(value, similar.get(key, value))
    grouped: set[UUID] = set()
    groups: list[MergeGroup] = []
    for centre in ordered:
        if centre.memory_id in grouped:
            continue
        taken = [centre]
        near = True
        for other in ordered:
            if len(taken) >= max_group:
                break
            if other.memory_id in grouped or other is centre or other.kind != centre.kind:
                continue
            found = similar.get(_pair(centre.memory_id, other.memory_id))
            if found is None or found < floor:
                continue
            taken.append(other)
            if other.content_digest != centre.content_digest:
                near = near and found >= NEAR_DUPLICATE_SIMILARITY
        if len(taken) < 2:
            continue
        grouped.update(m.memory_id for m in taken)
        groups.append(MergeGroup(tuple(taken), near))
    return groups


def union_excerpts(excerpt_lists: Sequence[Iterable[Excerpt]]) -> tuple[Excerpt, ...]:
    """Return every excerpt cited by any list, once each, in first-seen order: the
    consolidated version cites them all, so no source's provenance is lost."""
    seen: dict[tuple[UUID, int, int, str], Excerpt] = {}
    for excerpts in excerpt_lists:
        for excerpt in excerpts:
            key = (excerpt.observation_id, excerpt.start, excerpt.end, excerpt.excerpt_digest)
            seen.setdefault(key, excerpt)
    return tuple(seen.values())
