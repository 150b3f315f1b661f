"""The ``Cycle`` aggregate: one decay cycle over a tenant, recorded (``CycleCompleted``).

A cycle scores every live memory at one snapshot time and buckets it keep,
fade or prune (:mod:`palimpsest.domain.retention_score`). Its one event records the
snapshot time, the policy version, the counts per bucket and per type, the
likely duplicates it forced into the prune path, the memories it faded (and
those a later cycle kept again: no longer faded), the proposals it created and
the memories it archived, with how many prunes the collapse guard held back
and how many scores fell back to the heuristic importance. The fades are the
decision that gives a memory its ``faded`` label; the proposals and archivals
are their own events, recorded in the same transaction, so a cycle is applied
whole or not at all. Consolidating the survivors runs after that transaction
(its merges are writes of their own), so what it did is a second event,
``CycleConsolidated``, recorded once it has finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar
from uuid import UUID

from eventsourcing.domain import Aggregate, event

__all__ = ["BUCKET_MEANINGS", "Cycle", "FACTOR_MEANINGS"]

FACTOR_MEANINGS: Mapping[str, str] = MappingProxyType(
    {
        "importance": "how much the memory matters: its type's weight, its evidence grade, "
        "less for saying little (a pin is 1)",
        "recency": "how recently it was written or used: halves every half-life of its type",
        "scope": "how much the scope and project it lives in have been written or recalled "
        "in the activity window",
        "trust": "how well its evidence supports it (corroborated high, unsupported low)",
        "score": "the weighted mean of the four factors, by the policy's weights",
    }
)
"""What each factor of a retention score says, for a person reading a cycle's report
(docs/forgetting.md#the-retention-score has the formulas)."""

BUCKET_MEANINGS: Mapping[str, str] = MappingProxyType(
    {
        "keep": "score at or above fade_below: nothing happens",
        "fade": "score below fade_below: labelled faded, ranked lower in recall",
        "prune": "score below prune_below (or a likely duplicate of a newer memory): "
        "proposed for review, or archived with auto_archive_decayed",
    }
)
"""What each bucket means, for the same reader."""


class Cycle(Aggregate):
    """A decay cycle's outcome: recorded, then what consolidating its survivors did."""

    TOPIC = "palimpsest:Cycle"

    held_back: int | None = None
    """Class defaults, so a cycle recorded before these fields existed still loads."""
    importance_fallbacks: int | None = None
    consolidation: dict[str, Any] | None = None
    """What consolidating the survivors did (None until ``CycleConsolidated``)."""

    class Created(Aggregate.Created):
        """A decay cycle ran (``CycleCompleted``).

        ``counts`` maps keep, fade and prune to how many memories went there;
        ``by_type`` maps each memory type to such counts; ``duplicates`` lists
        ``{older, newer, similarity}``; ``faded`` and ``unfaded`` are memory ids;
        ``proposals`` the proposals created and ``archived`` the memories archived
        (reason ``decayed``); ``held_back`` how many prunes were proposed instead of
        archived because the collapse guard was reached, ``importance_fallbacks`` how
        many scores took the heuristic's importance (both None in events recorded
        before they were: version 1, upcast on reading).
        """

        class_version = 2
        LATER_FIELDS: ClassVar[frozenset[str]] = frozenset({"held_back", "importance_fallbacks"})
        """Fields version 1 did not have: the feed and histories leave them out while
        they are None, so an old event reads as it was recorded."""

        TOPIC = "palimpsest:CycleCompleted"
        tenant_id: UUID
        snapshot_at: datetime
        policy_version: int
        counts: dict[str, int]
        by_type: dict[str, dict[str, int]]
        duplicates: list[dict[str, Any]]
        faded: list[str]
        unfaded: list[str]
        proposals: list[str]
        archived: list[str]
        principal_id: UUID
        held_back: int | None = None
        importance_fallbacks: int | None = None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Version 1 recorded neither count: unknown, never a made-up 0."""
            state["held_back"] = None
            state["importance_fallbacks"] = None

    class Consolidated(Aggregate.Event):
        """Consolidating the cycle's survivors finished (``CycleConsolidated``).

        ``summary`` is what the run answered as ``consolidation``: groups, proposed,
        merged, already_open, held_back, reflections, summariser and failures; or
        ``{"failed": reason}`` / ``{"skipped": reason}``.
        """

        TOPIC = "palimpsest:CycleConsolidated"
        summary: dict[str, Any]
        principal_id: UUID

    @event(Created)
    def __init__(
        self,
        id: UUID,
        tenant_id: UUID,
        snapshot_at: datetime,
        policy_version: int,
        counts: dict[str, int],
        by_type: dict[str, dict[str, int]],
        duplicates: list[dict[str, Any]],
        faded: list[str],
        unfaded: list[str],
        proposals: list[str],
        archived: list[str],
        principal_id: UUID,
        held_back: int | None = None,
        importance_fallbacks: int | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.snapshot_at = snapshot_at
        self.policy_version = policy_version
        self.counts = counts
        self.by_type = by_type
        self.duplicates = duplicates
        self.faded = faded
        self.unfaded = unfaded
        self.proposals = proposals
        self.archived = archived
        self.principal_id = principal_id
        self.held_back = held_back
        self.importance_fallbacks = importance_fallbacks

    def consolidated(self, summary: dict[str, Any], principal_id: UUID) -> bool:
        """Record what consolidating the survivors did; False (nothing recorded) when
        it is recorded already: a cycle is consolidated once."""
        if self.consolidation is not None:
            return False
        self._consolidated(summary=summary, principal_id=principal_id)
        return True

    @event(Consolidated)
    def _consolidated(self, summary: dict[str, Any], principal_id: UUID) -> None:
        self.consolidation = summary
