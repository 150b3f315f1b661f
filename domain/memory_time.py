"""A memory's time: when it was last touched, for the forgetting pass and the decay cycle.

The rule (seed 000: freshness moves "through an edit, a reaffirm or a newer
neighbour"): a memory's time is the latest ``captured_at`` of the observations its
current version's active support cites, else when that current version was
recorded. So an edit (a new current version) and a reaffirm (a contribution to it,
citing a newer capture) touch a memory; imported history keeps its own time (its
captures, not when it was imported). Nothing else touches it: edges added or
retracted, importance, pins, archive and restore, accesses and reviews are facts
*about* a memory, not new content, and the pass and the cycle count reviews and
accesses apart where they count them at all. Both read this one rule
(:class:`MemoryTimes`, fed by ``projections/views/memory_times.py``), so they
cannot disagree on a memory's age.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Protocol
from uuid import UUID

from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation

__all__ = ["MEMORY_TIME_EVENTS", "MemoryTimes", "TimedMemory", "memory_time"]

MEMORY_TIME_EVENTS: tuple[type[object], ...] = (
    Memory.VersionRecorded,
    Memory.ContributionAdded,
    Observation.Created,
)
"""The only events a memory's time is read from (the observations' first events, the
memories' others)."""


def memory_time(
    cited: AbstractSet[UUID], captured: Mapping[UUID, datetime], version_time: datetime
) -> datetime:
    """Return a memory's time: the latest ``captured_at`` (``captured``, by observation)
    of the observations its current version's active support cites (``cited``), else
    when that version was recorded (``version_time``)."""
    times = [captured[o] for o in cited if o in captured]
    return max(times) if times else version_time


class TimedMemory(Protocol):
    """What :class:`MemoryTimes` reads of a live memory."""

    @property
    def version_id(self) -> UUID: ...

    @property
    def support(self) -> AbstractSet[str]: ...


class MemoryTimes:
    """Folds the events a memory's time is read from (:data:`MEMORY_TIME_EVENTS`), in any
    order: each observation's capture, the live memories' current versions' recording,
    and the observations their active support cites (``live``: the memories, by id)."""

    def __init__(self, live: Mapping[UUID, TimedMemory]) -> None:
        self._live = live
        self._captured: dict[UUID, datetime] = {}
        self._version_times: dict[UUID, datetime] = {}
        self._cited: dict[UUID, set[UUID]] = defaultdict(set)

    def take(self, event: object, recorded_at: datetime) -> bool:
        """Fold ``event`` (recorded at ``recorded_at``) in; return whether it is one of
        the kinds a time is read from."""
        if isinstance(event, Observation.Created):
            self._captured[event.originator_id] = event.captured_at
        elif isinstance(event, Memory.VersionRecorded):
            memory = self._live.get(event.originator_id)
            if memory is not None and event.version_id == memory.version_id:
                self._version_times[event.originator_id] = recorded_at
        elif isinstance(event, Memory.ContributionAdded):
            memory = self._live.get(event.originator_id)
            # The belief's support: the current version's active contributions.
            if memory is not None and str(event.contribution_id) in memory.support:
                self._cited[event.originator_id].add(UUID(str(event.excerpt["observation_id"])))
        else:
            return False
        return True

    def time_of(self, memory_id: UUID) -> datetime:
        """Return the time of ``memory_id``, once its events are folded in."""
        return memory_time(self._cited[memory_id], self._captured, self._version_times[memory_id])
