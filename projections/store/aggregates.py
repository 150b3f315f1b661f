"""Loading aggregates from the log, one or many at once, from what this process knows.

The write side decides from aggregates (never from a read model, which may
lag), and reads rebuild the recorded facts from them; both load them here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate
from eventsourcing.persistence import StoredEvent
from psycopg.rows import tuple_row

from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.memory import Memory
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.store.arrays import Int8Array, UuidArray
from palimpsest.projections.store.errors import MemoryUnprojectableError
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.queued import QueuingCursor, UnqueueableError
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import (
    queued_transaction,
    run_unread,
    tenant_transaction,
)
from palimpsest.projections.store.unreadable import (
    UnreadableEvent,
    UnreadableEventError,
    decode_event,
    unreadable,
)

__all__ = [
    "CURRENT",
    "LoadedAggregates",
    "aggregates_at",
    "aggregates_of",
    "event_positions",
    "load_aggregate",
    "loaded_with",
    "stranded_memories",
    "unreadable_of",
]

_A = TypeVar("_A", bound=Aggregate)
_T = TypeVar("_T")


class LoadedAggregates(dict[UUID, Any]):
    """Aggregates by id, and apart (:attr:`unreadable`) those left out because one of
    their events cannot be decoded or applied: a caller that loads many goes on
    without them, one that wanted that aggregate says why it cannot have it."""

    def __init__(self) -> None:
        super().__init__()
        self.unreadable: dict[UUID, UnreadableEvent] = {}
        self.stranded: dict[UUID, Any] = {}
        """Each unreadable memory as its events before the first unreadable one left
        it, at the version of its last event: what an erasure of it records on."""

    def merge(self, other: LoadedAggregates) -> None:
        """Add the aggregates and the unreadable ones of ``other``."""
        self.update(other)
        for key in other.unreadable:
            self.pop(key, None)
        self.unreadable.update(other.unreadable)
        self.stranded.update(other.stranded)


def unreadable_of(aggregates: dict[UUID, Any], aggregate_id: UUID) -> UnreadableEvent | None:
    """Return the event that kept ``aggregate_id`` out of a load, if one did."""
    if isinstance(aggregates, LoadedAggregates):
        return aggregates.unreadable.get(aggregate_id)
    return None


def load_aggregate(
    log: EventLog, tenant_id: UUID, aggregate_id: UUID, cls: type[_A], what: str
) -> _A:
    """Return the tenant's aggregate of type ``cls``.

    Raises:
        NotFoundError: no such aggregate in the tenant (or one of another kind).
        MemoryUnprojectableError: one of its events cannot be decoded or applied.
    """
    loaded = aggregates_of(log, tenant_id, [aggregate_id])
    poison = unreadable_of(loaded, aggregate_id)
    if poison is not None:
        raise MemoryUnprojectableError(aggregate_id, poison.reason)
    found = loaded.get(aggregate_id)
    if not isinstance(found, cls):
        msg = f"{what} {aggregate_id} not found"
        raise NotFoundError(msg)
    return found


def event_positions(
    log: EventLog, tenant_id: UUID, aggregate_id: UUID
) -> dict[int, tuple[int, datetime]]:
    """Return the log position and recorded time of each of an aggregate's events."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT originator_version, notification_id, recorded_at"
                " FROM {schema}.{events}"
                " WHERE originator_id = %s ORDER BY originator_version",
                log.datastore.schema,
            ),
            (aggregate_id,),
        )
        return {r["originator_version"]: (r["notification_id"], r["recorded_at"]) for r in cur}


CURRENT = 2**62
"""The ``limit`` of a read of the current state: past every log position."""

_LOAD = (
    # Per wanted aggregate, the version it is already known at (0: not known). An
    # unknown one starts from its latest snapshot taken at or before the limit (a
    # snapshot of version v folds events 1..v, all recorded at or before v's), a
    # known one from the event at its known version (its anchor, sent without its
    # state: present and visible to this tenant, or the known copy is not used);
    # then the events after. Each aggregate is read by its own index lookups
    # (LATERAL): the cost follows the events since, not the history, nor the table.
    # The first version to read is computed apart (``since``, and MATERIALIZED, so
    # that it is never inlined back) and the events' lookup compares a column with
    # it: under row-level security only leakproof conditions can bound an index
    # scan, and ``+`` (int8pl) is not one. With ``greatest(..., coalesce(...) + 1)``
    # in the lookup, every load read the aggregate's whole history by its id and
    # filtered it row by row.
    "WITH wanted AS (SELECT * FROM unnest(%b::uuid[], %b::bigint[]) AS w(id, after)),"
    " snap AS (SELECT w.id, s.originator_version, s.topic, s.state FROM wanted w"
    "  CROSS JOIN LATERAL (SELECT s.originator_version, s.topic, s.state"
    "   FROM {schema}.{snapshots} s WHERE s.originator_id = w.id AND w.after = 0"
    "   AND EXISTS (SELECT 1 FROM {schema}.{events} e WHERE e.originator_id = s.originator_id"
    "    AND e.originator_version = s.originator_version AND e.notification_id <= %s)"
    "   ORDER BY s.originator_version DESC LIMIT 1) s),"
    " since AS MATERIALIZED (SELECT w.id, w.after,"
    "  greatest(w.after, coalesce(snap.originator_version, 0) + 1) AS version"
    "  FROM wanted w LEFT JOIN snap ON snap.id = w.id)"
    " SELECT id AS originator_id, originator_version, topic, state, 0 AS kind FROM snap"
    " UNION ALL"
    " SELECT e.originator_id, e.originator_version, e.topic,"
    "  CASE WHEN e.originator_version > since.after THEN e.state END, 1"
    " FROM since CROSS JOIN LATERAL (SELECT e.originator_id, e.originator_version, e.topic, e.state"
    "  FROM {schema}.{events} e WHERE e.originator_id = since.id"
    "  AND e.originator_version >= since.version AND e.notification_id <= %s) e"
    " ORDER BY 1, 5, 2"
)


_BY_KEY_ONLY = (
    b"SELECT set_config('palimpsest.enable_bitmapscan', current_setting('enable_bitmapscan'),"
    b" true), set_config('enable_bitmapscan', 'off', true)"
)
"""Run before :data:`_LOAD` (:func:`loaded_with`, :func:`aggregates_at`): no bitmap
scans, so each aggregate's events are found by the primary key alone. Without
statistics on the events table (a store just written in bulk: autovacuum skips
analysing a table it cannot lock at once, and every write locks it), the planner
took a ``BitmapAnd`` of the primary key and the ``(tenant_id, notification_id)``
index, reading every event of the tenant in that index to load one memory (21,941
of them: 0.71 ms against 0.11 ms; docs/benchmarks.md)."""

_AS_BEFORE = (
    b"SELECT set_config('enable_bitmapscan', current_setting('palimpsest.enable_bitmapscan'), true)"
)
"""Run after :data:`_LOAD`: the transaction's next statements are planned as before."""


def aggregates_at(
    cur: Any, log: EventLog, tenant_id: UUID, aggregate_ids: list[UUID], limit: int = CURRENT
) -> LoadedAggregates:
    """Return the tenant's aggregates of ``aggregate_ids`` as of log position ``limit``,
    read on ``cur`` (an open transaction of ``tenant_id``); ids without events are left
    out. The aggregates returned are the caller's to change.

    Each starts from its latest snapshot at or before ``limit``, or, for a current
    read (``limit`` :data:`CURRENT`), from the copy this process last loaded or
    recorded (:mod:`palimpsest.projections.store.aggregate_cache`): either way one statement
    reads only the events since, never the whole history of a long memory.
    """
    if isinstance(cur, QueuingCursor):  # its connection would run the load at once
        msg = "aggregates_at reads at once: queue a load with loaded_with"
        raise UnqueueableError(msg)
    known = _known(log, tenant_id, aggregate_ids, limit)
    run_unread(cur, _BY_KEY_ONLY.decode())
    with cur.connection.cursor(row_factory=tuple_row) as rows:
        rows.execute(*_load_statement(log, aggregate_ids, known, limit))
        aggregates = _loaded(log, rows.fetchall(), known)
        lost = [i for i in known if i not in aggregates and i not in aggregates.unreadable]
        if lost:
            # Known copies whose anchor this tenant cannot see: read them afresh.
            rows.execute(*_load_statement(log, lost, {}, limit))
            aggregates.merge(_loaded(log, rows.fetchall(), {}))
    run_unread(cur, _AS_BEFORE.decode())
    _keep(log, tenant_id, aggregates, limit)
    return aggregates


def loaded_with(
    log: EventLog,
    tenant_id: UUID,
    aggregate_ids: list[UUID],
    also: Callable[[QueuingCursor], _T],
    limit: int = CURRENT,
) -> tuple[LoadedAggregates, _T]:
    """Return what :func:`aggregates_at` returns, read in a transaction of its own sent
    in one round trip (:func:`~palimpsest.projections.store.tenancy.queued_transaction`), and what
    ``also`` returned, given the same transaction's cursor to queue its own reads on:
    one snapshot (``REPEATABLE READ``) for both.

    When a copy this process knew had an anchor the tenant cannot see, the whole
    transaction is sent again without known copies.
    """
    for afresh in (False, True):
        known = {} if afresh else _known(log, tenant_id, aggregate_ids, limit)
        with queued_transaction(log.datastore, tenant_id, commit=False) as cur:
            cur.execute(_BY_KEY_ONLY)
            cur.execute(*_load_statement(log, aggregate_ids, known, limit))
            answer = cur.answer()
            cur.execute(_AS_BEFORE)
            extra = also(cur)
        aggregates = _loaded(log, answer.rows, known)
        if all(i in aggregates or i in aggregates.unreadable for i in known):
            _keep(log, tenant_id, aggregates, limit)
            return aggregates, extra
    raise AssertionError("a read without known copies keeps none it could lose")


def _known(
    log: EventLog, tenant_id: UUID, aggregate_ids: list[UUID], limit: int
) -> dict[UUID, Any]:
    """Return the copies this process knows of ``aggregate_ids`` (only for a current read)."""
    if limit < CURRENT:
        return {}
    cache = aggregate_cache(log)
    known: dict[UUID, Any] = {}
    for aggregate_id in aggregate_ids:
        found = cache.version_of(tenant_id, aggregate_id)
        if found is not None:
            known[aggregate_id] = found
    return known


def _keep(log: EventLog, tenant_id: UUID, aggregates: dict[UUID, Any], limit: int) -> None:
    """Keep the aggregates of a current read for the next."""
    if limit >= CURRENT:
        aggregate_cache(log).keep(tenant_id, aggregates.values())


def _load_statement(
    log: EventLog, aggregate_ids: list[UUID], known: dict[UUID, Any], limit: int
) -> tuple[bytes, tuple[Any, ...]]:
    """Return :data:`_LOAD` and its parameters, for ``aggregate_ids`` from ``known``."""
    after = Int8Array(known[i].version if i in known else 0 for i in aggregate_ids)
    return (
        schema_query(_LOAD, log.datastore.schema),
        (UuidArray(aggregate_ids), after, limit, limit),
    )


def _loaded(log: EventLog, rows: list[tuple[Any, ...]], known: dict[UUID, Any]) -> LoadedAggregates:
    """Return the aggregates in the rows of :data:`_LOAD`, each from its snapshot or its
    ``known`` copy (only when its anchor was read) and the events after it; one with an
    event that cannot be decoded or applied is left out, and kept apart with why."""
    aggregates = LoadedAggregates()
    poisoned = aggregates.unreadable
    skipped: set[UUID] = set()
    mapper = log.mapper
    for originator_id, version, topic, state, _ in rows:
        key = as_uuid(originator_id)
        if state is None:  # the anchor of a known copy
            aggregates[key] = known[key]
            continue
        if key in known and key not in aggregates:
            skipped.add(key)  # its anchor is gone: read it afresh (the caller does)
        if key in skipped:
            continue
        stored = StoredEvent(originator_id, version, topic, bytes(state))
        if key in poisoned:
            _after_unreadable(aggregates, key, stored, mapper)
            continue
        try:
            # Not checked complete: applying it at once fails on a missing field.
            event = decode_event(mapper, stored, complete=False)
            # Every event and snapshot of this log can mutate (the mapper built it from
            # a topic of ours): no runtime protocol check, which costs tens of
            # microseconds.
            aggregates[key] = event.mutate(aggregates.get(key))  # type: ignore[attr-defined]
        except Exception as error:  # undecodable, or decoded but it cannot be applied
            poisoned[key] = (
                error.event
                if isinstance(error, UnreadableEventError)
                else (unreadable(stored, error))
            )
            stranded = aggregates.pop(key, None)
            if isinstance(stranded, Memory):
                stranded.version = version
                aggregates.stranded[key] = stranded
    return aggregates


def _after_unreadable(
    aggregates: LoadedAggregates, key: UUID, stored: StoredEvent, mapper: Any
) -> None:
    """Read an event that follows an unreadable one of the same memory.

    What the unreadable event did is unknown, so nothing after it is applied,
    but an erasure's events are: an erasure removes every version whatever the
    memory held, so the memory it ends reads as erased, not unreadable
    (:func:`stranded_memories` is what such an erasure records on).
    """
    stranded = aggregates.stranded.get(key)
    if stranded is None:
        return
    try:
        event = decode_event(mapper, stored)
    except UnreadableEventError:
        event = None
    if not isinstance(event, Memory.VersionErased | Memory.Erased):
        stranded.version = stored.originator_version
        return
    stranded.version = stored.originator_version - 1
    try:
        stranded = event.mutate(stranded)
    except Exception:  # the erasure's own events do not fit: it stays unreadable
        del aggregates.stranded[key]
        return
    aggregates.stranded[key] = stranded
    if isinstance(event, Memory.Erased):
        aggregates[key] = stranded
        del aggregates.stranded[key]
        del aggregates.unreadable[key]


def stranded_memories(log: EventLog, tenant_id: UUID, memory_ids: list[UUID]) -> dict[UUID, Any]:
    """Return those of ``memory_ids`` that an unreadable event keeps from loading, each
    as its readable events left it, at the version of its last event: an erasure
    records on these, after every event the log holds of them."""
    return dict(aggregates_of(log, tenant_id, memory_ids).stranded)


def aggregates_of(log: EventLog, tenant_id: UUID, aggregate_ids: list[UUID]) -> LoadedAggregates:
    """Return the tenant's aggregates of ``aggregate_ids``, rebuilt from one query for
    all their events (one round trip); ids without events are left out."""
    return loaded_with(log, tenant_id, aggregate_ids, _nothing)[0]


def _nothing(_: QueuingCursor) -> None:
    """Queue nothing more."""
