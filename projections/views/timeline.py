"""History reads: a memory's whole record, and the tenant's event feed.

Both are read from the log itself (never from a read model), so they are
always complete. They carry references and digests, never claim text or
raw bytes, except the version contents a memory's history shows, joined
from the payload store (``null`` once erased).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

from eventsourcing.domain import CanMutateAggregate, DomainEventProtocol
from eventsourcing.persistence import StoredEvent
from pydantic import Field, JsonValue

from palimpsest.domain.edge import EdgeKind
from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.memory import Memory
from palimpsest.projections.store.errors import MemoryUnprojectableError
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.store.unreadable import UnreadableEvent, decode_event, unreadable
from palimpsest.projections.views._escaped import escape_surrogates, escaped
from palimpsest.projections.views._write_times import WriteEnd, write_ends
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.versions import RecordedMemory, RecordedVersion, version_contents

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "ContributionRecord",
    "EdgeRecord",
    "EventRecord",
    "HistoryVersion",
    "MemoryHistory",
    "UNREADABLE_TYPE",
    "describe_event",
    "describe_row",
    "event_feed",
    "memory_history",
    "unreadable_record",
]

UNREADABLE_TYPE = "Unreadable"
"""The ``type`` of a record standing for an event this release cannot decode or
apply: its envelope, and in ``data`` its stored ``topic``, the ``state_sha256`` of
its state bytes (never the bytes) and the ``reason``."""

_HIDDEN_FIELDS = frozenset({"originator_id", "originator_version", "timestamp", "token_digest"})
"""Fields a feed never shows: the envelope (shown separately) and token digests."""


class EventRecord(Record):
    """One accepted event: its log position, time, type, aggregate and principal, and
    its fields (references, digests and labels; never content)."""

    position: int
    recorded_at: datetime
    visible_at: datetime | None = Field(
        default=None,
        description="When the write that recorded the event became visible (the time of "
        "its last event): an as-of read at this time reads the state after the write.",
    )
    type: str
    aggregate_id: UUID
    aggregate_version: int
    principal_id: UUID | None
    data: dict[str, JsonValue]


class ContributionRecord(Record):
    """Support for a version: which observation, by whom, and whether it still counts."""

    contribution_id: UUID
    observation_id: UUID
    proposer_id: UUID
    model_id: str | None
    trust: float
    active: bool
    deactivated_by: UUID | None = Field(description="The decision that deactivated it.")
    position: int


class HistoryVersion(RecordedVersion):
    """A version in a memory's history, with the contributions that support it."""

    excerpts: list[Excerpt] = Field(serialization_alias="formed_from")
    contributions: list[ContributionRecord]


class EdgeRecord(Record):
    """An edge touching the memory, in either direction."""

    edge_id: UUID
    kind: EdgeKind
    source_id: UUID
    target_id: UUID
    decision_id: UUID | None
    position: int


class MemoryHistory(RecordedMemory):
    """A memory's whole record, from the log."""

    versions: list[HistoryVersion]
    edges: list[EdgeRecord]
    events: list[EventRecord]


def _plain(value: Any) -> JsonValue:
    if isinstance(value, str):
        return escape_surrogates(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {escape_surrogates(str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    plain: JsonValue = value
    return plain


def describe_event(
    event: DomainEventProtocol[UUID],
    position: int,
    recorded_at: datetime,
    visible_at: datetime | None = None,
) -> EventRecord:
    """Return one event as the feed and histories show it: its type, envelope and
    fields (references, digests, labels; events never carry content), and when its
    write became visible, if known."""
    topic = getattr(type(event), "TOPIC", type(event).__qualname__)
    assert is_dataclass(event)
    # A field added to an event class later (its LATER_FIELDS) is left out while it is
    # None, as in every event recorded before it: old events read as they were written.
    later: frozenset[str] = getattr(type(event), "LATER_FIELDS", frozenset())
    data = {
        f.name: _plain(getattr(event, f.name))
        for f in fields(event)
        if f.name not in _HIDDEN_FIELDS and not (f.name in later and getattr(event, f.name) is None)
    }
    return EventRecord(
        position=position,
        recorded_at=recorded_at,
        visible_at=visible_at,
        type=str(topic).removeprefix("palimpsest:"),
        aggregate_id=event.originator_id,
        aggregate_version=event.originator_version,
        principal_id=data.get("principal_id"),
        data=data,
    )


def unreadable_record(
    event: UnreadableEvent,
    position: int,
    recorded_at: datetime,
    visible_at: datetime | None = None,
) -> EventRecord:
    """Return the opaque, flagged record of an event that cannot be read (type
    :data:`UNREADABLE_TYPE`)."""
    return EventRecord(
        position=position,
        recorded_at=recorded_at,
        visible_at=visible_at,
        type=UNREADABLE_TYPE,
        aggregate_id=event.originator_id,
        aggregate_version=event.originator_version,
        principal_id=None,
        data={
            "topic": escape_surrogates(event.topic),
            "state_sha256": event.state_sha256,
            "reason": escape_surrogates(event.reason),
        },
    )


def describe_row(
    log: EventLog, row: Any, recorded_at: datetime, visible_at: datetime | None = None
) -> EventRecord:
    """Return the record of a row of the events table (``originator_id``,
    ``originator_version``, ``topic``, ``state``, ``notification_id``): the event as
    :func:`describe_event` shows it, or its flagged record if it cannot be read, so
    one bad row never stops the feed or an export."""
    stored = StoredEvent(
        row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
    )
    position = row["notification_id"]
    try:
        event = decode_event(log.mapper, stored)
        return describe_event(event, position, recorded_at, visible_at)
    except Exception as error:
        poison = getattr(error, "event", None)
        if not isinstance(poison, UnreadableEvent):
            poison = unreadable(stored, error)
        return unreadable_record(poison, position, recorded_at, visible_at)


_EVENTS_AFTER = (
    "SELECT originator_id, originator_version, topic, state, notification_id, recorded_at"
    " FROM {schema}.palimpsest_events WHERE notification_id > %s"
    " ORDER BY notification_id LIMIT %s"
)
_EVENTS_OF = (
    "SELECT originator_id, originator_version, topic, state, notification_id, recorded_at"
    " FROM {schema}.palimpsest_events WHERE originator_id = %s ORDER BY originator_version"
)
_EVENTS_OF_TOPIC = (
    "SELECT originator_id, originator_version, topic, state, notification_id, recorded_at"
    " FROM {schema}.palimpsest_events WHERE originator_id = ANY(%s) AND topic = %s"
)


def _rows(
    log: EventLog, tenant_id: UUID, query: LiteralString, params: tuple[Any, ...]
) -> tuple[list[Any], dict[int, WriteEnd]]:
    """Return the rows of ``query``, and the end of the write of each (one snapshot)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(schema_sql(query, log.datastore.schema), params)
        rows = cur.fetchall()
        ends = write_ends(cur, log.datastore.schema, [r["notification_id"] for r in rows])
    return rows, ends


def _described(
    event: DomainEventProtocol[UUID], row: Any, ends: dict[int, WriteEnd]
) -> EventRecord:
    """Return the event of ``row`` as shown, with when its write became visible."""
    position = row["notification_id"]
    end = ends.get(position)
    return describe_event(
        event, position, row["recorded_at"], None if end is None else end.visible_at
    )


def _decode(log: EventLog, row: Any) -> DomainEventProtocol[UUID]:
    """Return the event of ``row``; raises what :func:`decode_event` raises."""
    return decode_event(
        log.mapper,
        StoredEvent(
            row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
        ),
    )


def event_feed(
    log: EventLog, tenant_id: UUID, *, after: int, limit: int
) -> tuple[list[EventRecord], int]:
    """Return up to ``limit`` of the tenant's events after log position ``after``,
    oldest first, and the position to continue after."""
    rows, ends = _rows(log, tenant_id, _EVENTS_AFTER, (after, limit))
    events = []
    for row in rows:
        end = ends.get(row["notification_id"])
        visible_at = None if end is None else end.visible_at
        events.append(describe_row(log, row, row["recorded_at"], visible_at))
    return events, (rows[-1]["notification_id"] if rows else after)


def _folded(
    log: EventLog, memory_id: UUID, rows: list[Any], ends: dict[int, WriteEnd]
) -> tuple[Any, list[EventRecord], dict[UUID, EventRecord], dict[UUID, int]]:
    """Return the memory its rows fold into, the records of its events, and where each
    version and contribution was recorded.

    Raises:
        MemoryUnprojectableError: an event cannot be decoded or applied, and no erasure
            followed it (after one, only an erasure applies, as loads apply it:
            :mod:`palimpsest.projections.store.aggregates`).
    """
    memory: Any = None
    touched: list[EventRecord] = []
    version_at: dict[UUID, EventRecord] = {}
    contribution_at: dict[UUID, int] = {}
    unreadable: str | None = None
    for row in rows:
        try:
            event = _decode(log, row)
            assert isinstance(event, CanMutateAggregate)
            if unreadable is None:
                memory = event.mutate(memory)
            elif isinstance(event, Memory.VersionErased | Memory.Erased):
                memory.version = event.originator_version - 1
                memory = event.mutate(memory)
                unreadable = None if isinstance(event, Memory.Erased) else unreadable
            else:  # shown, not applied: what the unreadable event did is unknown
                memory.version = event.originator_version
        except Exception as error:
            if memory is None:
                raise MemoryUnprojectableError(memory_id, str(error)) from error
            unreadable = unreadable or str(error)
            memory.version = row["originator_version"]
            touched.append(describe_row(log, row, row["recorded_at"]))
            continue
        described = _described(event, row, ends)
        touched.append(described)
        if isinstance(event, Memory.VersionRecorded):
            version_at[event.version_id] = described
        elif isinstance(event, Memory.ContributionAdded):
            contribution_at[event.contribution_id] = row["notification_id"]
    if unreadable is not None:
        raise MemoryUnprojectableError(memory_id, unreadable)
    return memory, touched, version_at, contribution_at


def memory_history(log: EventLog, tenant_id: UUID, memory_id: UUID) -> MemoryHistory:
    """Return every version of a memory with its content, formation excerpts and
    contributions (active or deactivated, and by which decision), its edges in both
    directions, and every event that touched it, each with position, time and principal.

    Logged text is served with lone surrogates escaped
    (:mod:`palimpsest.projections.views._escaped`).

    Raises:
        NotFoundError: no such memory in the tenant.
        MemoryUnprojectableError: one of its events cannot be decoded or applied (the
            feed and export show that event as a flagged record).
    """
    rows, ends = _rows(log, tenant_id, _EVENTS_OF, (memory_id,))
    memory, touched, version_at, contribution_at = _folded(log, memory_id, rows, ends)
    if not isinstance(memory, Memory):
        msg = f"memory {memory_id} not found"
        raise NotFoundError(msg)
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT linked_id, kind, outgoing, edge_id, position FROM {schema}.memory_links"
                " WHERE memory_id = %s ORDER BY position, edge_id",
                log.datastore.schema,
            ),
            (memory.id,),
        )
        links = cur.fetchall()
    incoming = {link["edge_id"] for link in links if not link["outgoing"]}
    if incoming:
        sources = sorted({link["linked_id"] for link in links if not link["outgoing"]}, key=str)
        found, found_ends = _rows(
            log, tenant_id, _EVENTS_OF_TOPIC, (sources, Memory.EdgeAdded.TOPIC)
        )
        for r in found:
            try:
                event = _decode(log, r)
            except Exception:  # another memory's poison: it answers for itself
                continue
            if isinstance(event, Memory.EdgeAdded) and event.edge_id in incoming:
                touched.append(_described(event, r, found_ends))
    decided = {
        e.data["edge_id"]: e.data.get("decision_id") for e in touched if e.type == "EdgeAdded"
    }
    touched.sort(key=lambda e: (e.position, str(e.aggregate_id), e.aggregate_version))
    contents = version_contents(log, tenant_id, memory)
    versions = []
    for record in memory.versions:
        recorded = version_at[record.version_id]
        contributions = [
            ContributionRecord(
                contribution_id=c.contribution_id,
                observation_id=c.observation_id,
                proposer_id=c.proposer_id,
                model_id=None if c.model_id is None else escape_surrogates(c.model_id),
                trust=c.trust,
                active=c.active,
                deactivated_by=c.deactivated_by,
                position=contribution_at[c.contribution_id],
            )
            for c in memory.contributions
            if c.version_id == record.version_id
        ]
        versions.append(
            HistoryVersion.of(
                record,
                contents[record.version_id],
                recorded.position,
                recorded.recorded_at,
                recorded.visible_at or recorded.recorded_at,
                contributions=contributions,
            )
        )
    history = MemoryHistory.of(
        memory,
        versions=versions,
        edges=[
            EdgeRecord(
                edge_id=link["edge_id"],
                kind=link["kind"],
                source_id=memory.id if link["outgoing"] else link["linked_id"],
                target_id=link["linked_id"] if link["outgoing"] else memory.id,
                decision_id=decided.get(str(link["edge_id"])),
                position=link["position"],
            )
            for link in links
        ],
        events=touched,
    )
    attributes = {"scope": history.scope, "project": history.project, "topic": history.topic}
    return history.model_copy(update=escaped(attributes))
