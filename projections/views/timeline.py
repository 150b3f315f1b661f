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
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.versions import RecordedMemory, RecordedVersion, version_contents
from palimpsest.projections.views.write_times import WriteEnd, write_ends

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "ContributionRecord",
    "EdgeRecord",
    "EventRecord",
    "HistoryVersion",
    "MemoryHistory",
    "describe_event",
    "event_feed",
    "memory_history",
]

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
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
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
    data = {
        f.name: _plain(getattr(event, f.name))
        for f in fields(event)
        if f.name not in _HIDDEN_FIELDS
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
    return log.mapper.to_domain_event(
        StoredEvent(
            row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
        )
    )


def event_feed(
    log: EventLog, tenant_id: UUID, *, after: int, limit: int
) -> tuple[list[EventRecord], int]:
    """Return up to ``limit`` of the tenant's events after log position ``after``,
    oldest first, and the position to continue after."""
    rows, ends = _rows(log, tenant_id, _EVENTS_AFTER, (after, limit))
    events = [_described(_decode(log, r), r, ends) for r in rows]
    return events, (rows[-1]["notification_id"] if rows else after)


def memory_history(log: EventLog, tenant_id: UUID, memory_id: UUID) -> MemoryHistory:
    """Return every version of a memory with its content, formation excerpts and
    contributions (active or deactivated, and by which decision), its edges in both
    directions, and every event that touched it, each with position, time and principal.

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    rows, ends = _rows(log, tenant_id, _EVENTS_OF, (memory_id,))
    memory: Any = None
    touched: list[EventRecord] = []
    version_at: dict[UUID, EventRecord] = {}
    contribution_at: dict[UUID, int] = {}
    for row in rows:
        event = _decode(log, row)
        assert isinstance(event, CanMutateAggregate)
        memory = event.mutate(memory)
        described = _described(event, row, ends)
        touched.append(described)
        if isinstance(event, Memory.VersionRecorded):
            version_at[event.version_id] = described
        elif isinstance(event, Memory.ContributionAdded):
            contribution_at[event.contribution_id] = row["notification_id"]
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
            event = _decode(log, r)
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
                model_id=c.model_id,
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
    return MemoryHistory.of(
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
