"""Reading live memories' times from the log: the one query the forgetting pass and the
decay cycle share (the rule is :mod:`palimpsest.domain.memory_time`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from palimpsest.domain.memory_time import MEMORY_TIME_EVENTS, MemoryTimes, TimedMemory
from palimpsest.domain.observation import Observation
from palimpsest.projections.store.sql import schema_query

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["DatedMemories", "date_memories"]

_EVENTS = (
    "SELECT e.originator_id, e.originator_version, e.topic, e.state, e.recorded_at"
    " FROM {schema}.{events} e"
    " WHERE e.originator_id = ANY(%(ids)s) AND e.topic = ANY(%(memory_topics)s)"
    " UNION ALL"
    " SELECT o.originator_id, o.originator_version, o.topic, o.state, o.recorded_at"
    " FROM {schema}.{events} o"
    " WHERE o.originator_version = 1 AND o.topic = %(observed)s AND o.originator_id IN"
    " (SELECT l.observation_id FROM {schema}.evidence_links l WHERE l.memory_id = ANY(%(ids)s))"
)
"""The memories' own events of the given topics, and the capture of every observation
they ever cited (a superset of what their current versions cite)."""


@dataclass
class DatedMemories:
    """What :func:`date_memories` read."""

    times: dict[UUID, datetime]
    """Each live memory's time."""
    also: list[Any] = field(default_factory=list)
    """The memories' events of the extra kinds asked for, in no particular order."""


def date_memories(
    cur: Any,
    log: EventLog,
    live: Mapping[UUID, TimedMemory],
    *,
    also: tuple[type[Any], ...] = (),
) -> DatedMemories:
    """Return the time of each memory of ``live`` (by id), and, read in the same scan,
    the memories' own events of the kinds ``also`` names (events that are no memory's
    time: a caller's own business, such as retracted edges or a given importance).

    The states are decoded by the log's mapper, not by PostgreSQL's JSON: the log may
    hold text ``json`` refuses (U+0000, lone surrogates; see
    :mod:`palimpsest.projections.store.storable`) in fields this never reads.
    """
    if not live:
        return DatedMemories({})
    memory_kinds = [k for k in (*MEMORY_TIME_EVENTS, *also) if k is not Observation.Created]
    cur.execute(
        schema_query(_EVENTS, log.datastore.schema),
        {
            "ids": list(live),
            "memory_topics": [_topic(k) for k in memory_kinds],
            "observed": Observation.Created.TOPIC,
        },
    )
    times = MemoryTimes(live)
    others: list[Any] = []
    for r in cur.fetchall():
        event = log.mapper.to_domain_event(
            StoredEvent(r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
        )
        if not times.take(event, r["recorded_at"]) and isinstance(event, also):
            others.append(event)
    return DatedMemories({m: times.time_of(m) for m in live}, others)


def _topic(kind: type[Any]) -> str:
    topic: str = kind.TOPIC
    return topic
