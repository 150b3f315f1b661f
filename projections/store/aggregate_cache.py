"""The write side's resident aggregates: each as last read or written, by tenant and id.

Rebuilding a memory from the log decodes every event since its last snapshot
(about 15 microseconds each here), and a memory revised fifty times costs
that on every write to it and every drain of it. This cache keeps each
aggregate at the version it was last loaded or recorded at, and a load reads
only the events after that version (:func:`palimpsest.projections.store.aggregates.aggregates_at`),
in the same statement that would have read them all: an entry is never
trusted alone, so it can never hide an event another process recorded.

A load also reads the event at the cached version itself (its anchor): an
entry whose anchor the tenant cannot see (another tenant's aggregate, or rows
gone with a deleted tenant) is a miss, never an answer.

Aggregates change as events are applied to them, so the cache holds its own
copies and hands out copies (:func:`copied`: new containers, shared immutable
elements; every aggregate of :mod:`domain` changes only its top-level lists,
dicts and sets in place).
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

from palimpsest.projections.store.resident import ResidentCache

if TYPE_CHECKING:
    from collections.abc import Iterable

    from eventsourcing.domain import Aggregate

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "AggregateCache",
    "DEFAULT_AGGREGATE_ENTRIES",
    "aggregate_cache",
    "copied",
]

DEFAULT_AGGREGATE_ENTRIES = 4_096
"""Aggregates kept per process, unless configured otherwise."""

_A = TypeVar("_A")

_CONTAINERS = (list, dict, set)


def copied(aggregate: _A) -> _A:
    """Return a copy of ``aggregate`` that can change without changing it: the same
    attributes, each list, dict and set a new one (its elements shared: immutable)."""
    copy = object.__new__(type(aggregate))
    copy.__dict__.update(
        {
            name: value.copy() if type(value) in _CONTAINERS else value
            for name, value in vars(aggregate).items()
        }
    )
    return copy


class AggregateCache(ResidentCache[tuple[UUID, UUID], "Aggregate"]):
    """Aggregates by (tenant, id), each at its version, stored and handed out as copies."""

    def version_of(self, tenant_id: UUID, aggregate_id: UUID) -> Aggregate | None:
        """Return a copy of the cached aggregate, if any."""
        found = self.get((tenant_id, aggregate_id))
        return None if found is None else copied(found)

    def peek(self, tenant_id: UUID, aggregate_id: UUID) -> Aggregate | None:
        """Return the cached aggregate itself, not a copy, to read an attribute that
        never changes (a memory's type): it must not be changed."""
        return self.get((tenant_id, aggregate_id))

    def keep(self, tenant_id: UUID, aggregates: Iterable[Aggregate]) -> None:
        """Remember copies of ``aggregates`` as they are now (recorded or read: none may
        hold pending events)."""
        for aggregate in aggregates:
            self.put((tenant_id, aggregate.id), copied(aggregate))


_caches: weakref.WeakKeyDictionary[EventLog, AggregateCache] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def aggregate_cache(log: EventLog) -> AggregateCache:
    """Return the aggregate cache of ``log``'s process (one per event log, made on first use)."""
    with _caches_lock:
        cache = _caches.get(log)
        if cache is None:
            cache = _caches[log] = AggregateCache(DEFAULT_AGGREGATE_ENTRIES)
        return cache
