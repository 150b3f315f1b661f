"""The ``Cycle`` aggregate: one decay cycle over a tenant, recorded (``CycleCompleted``).

A cycle scores every live memory at one snapshot time and buckets it keep,
fade or prune (:mod:`palimpsest.domain.retention_score`). Its one event records the
snapshot time, the policy version, the counts per bucket and per type, the
likely duplicates it forced into the prune path, the memories it faded (and
those a later cycle kept again: no longer faded), the proposals it created and
the memories it archived. The fades are the decision that gives a memory its
``faded`` label; the proposals and archivals are their own events, recorded in
the same transaction, so a cycle is applied whole or not at all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

__all__ = ["Cycle"]


class Cycle(Aggregate):
    """A decay cycle's outcome. Never changes once recorded."""

    TOPIC = "palimpsest:Cycle"

    class Created(Aggregate.Created):
        """A decay cycle ran (``CycleCompleted``).

        ``counts`` maps keep, fade and prune to how many memories went there;
        ``by_type`` maps each memory type to such counts; ``duplicates`` lists
        ``{older, newer, similarity}``; ``faded`` and ``unfaded`` are memory ids;
        ``proposals`` the proposals created and ``archived`` the memories archived
        (reason ``decayed``).
        """

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
