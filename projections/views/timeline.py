"""History reads: a memory's whole record, and the tenant's event feed.

Both are read from the log itself (never from a read model), so they are
always complete. They carry references and digests, never claim text or
raw bytes, except the version contents a memory's history shows, joined
from the payload store (``null`` once erased).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import CanMutateAggregate, DomainEventProtocol
from eventsourcing.persistence import StoredEvent

from domain.errors import NotFoundError
from domain.memory import Memory
from projections.store.eventlog import EventLog
from projections.store.migrations import EVENTS_TABLE
from projections.store.tenancy import tenant_transaction
from projections.views.beliefs import erasure_placeholder, version_contents

__all__ = [
    "describe_event",
    "event_feed",
    "memory_history",
]

_HIDDEN_FIELDS = frozenset({"originator_id", "originator_version", "timestamp", "token_digest"})
"""Fields a feed never shows: the envelope (shown separately) and token digests."""


def _plain(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def describe_event(
    event: DomainEventProtocol[UUID], position: int, recorded_at: datetime
) -> dict[str, Any]:
    """Return one event as the feed and histories show it: its type, envelope and
    fields (references, digests, labels; events never carry content)."""
    topic = getattr(type(event), "TOPIC", type(event).__qualname__)
    assert is_dataclass(event)
    data = {
        f.name: _plain(getattr(event, f.name))
        for f in fields(event)
        if f.name not in _HIDDEN_FIELDS
    }
    return {
        "position": position,
        "recorded_at": recorded_at.isoformat(),
        "type": str(topic).removeprefix("palimpsest:"),
        "aggregate_id": str(event.originator_id),
        "aggregate_version": event.originator_version,
        "principal_id": data.get("principal_id"),
        "data": data,
    }


def _rows(log: EventLog, tenant_id: UUID, where: str, params: tuple[Any, ...]) -> list[Any]:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            "SELECT originator_id, originator_version, topic, state, notification_id,"
            f' recorded_at FROM "{log.datastore.schema}"."{EVENTS_TABLE}" WHERE {where}',
            params,
        )
        return cur.fetchall()


def _decode(log: EventLog, row: Any) -> DomainEventProtocol[UUID]:
    return log.mapper.to_domain_event(
        StoredEvent(
            row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
        )
    )


def event_feed(
    log: EventLog, tenant_id: UUID, *, after: int, limit: int
) -> tuple[list[dict[str, Any]], int]:
    """Return up to ``limit`` of the tenant's events after log position ``after``,
    oldest first, and the position to continue after."""
    rows = _rows(
        log,
        tenant_id,
        "notification_id > %s ORDER BY notification_id LIMIT %s",
        (after, limit),
    )
    events = [describe_event(_decode(log, r), r["notification_id"], r["recorded_at"]) for r in rows]
    return events, (rows[-1]["notification_id"] if rows else after)


def memory_history(log: EventLog, tenant_id: UUID, memory_id: UUID) -> dict[str, Any]:
    """Return every version of a memory with its content, formation excerpts and
    contributions (active or deactivated, and by which decision), its edges in both
    directions, and every event that touched it, each with position, time and principal.

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    rows = _rows(log, tenant_id, "originator_id = %s ORDER BY originator_version", (memory_id,))
    memory: Any = None
    touched: list[dict[str, Any]] = []
    version_at: dict[UUID, dict[str, Any]] = {}
    contribution_at: dict[UUID, int] = {}
    for row in rows:
        event = _decode(log, row)
        assert isinstance(event, CanMutateAggregate)
        memory = event.mutate(memory)
        described = describe_event(event, row["notification_id"], row["recorded_at"])
        touched.append(described)
        if isinstance(event, Memory.VersionRecorded):
            version_at[event.version_id] = described
        elif isinstance(event, Memory.ContributionAdded):
            contribution_at[event.contribution_id] = row["notification_id"]
    if not isinstance(memory, Memory):
        msg = f"memory {memory_id} not found"
        raise NotFoundError(msg)
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT linked_id, kind, outgoing, edge_id, position FROM "{schema}".memory_links'
            " WHERE memory_id = %s ORDER BY position, edge_id",
            (memory.id,),
        )
        links = cur.fetchall()
    incoming = {link["edge_id"] for link in links if not link["outgoing"]}
    if incoming:
        sources = sorted({link["linked_id"] for link in links if not link["outgoing"]}, key=str)
        for r in _rows(
            log,
            tenant_id,
            "originator_id = ANY(%s) AND topic = %s",
            (sources, Memory.EdgeAdded.TOPIC),
        ):
            event = _decode(log, r)
            if isinstance(event, Memory.EdgeAdded) and event.edge_id in incoming:
                touched.append(describe_event(event, r["notification_id"], r["recorded_at"]))
    decided = {
        e["data"]["edge_id"]: e["data"].get("decision_id")
        for e in touched
        if e["type"] == "EdgeAdded"
    }
    touched.sort(key=lambda e: (e["position"], e["aggregate_id"], e["aggregate_version"]))
    contents = version_contents(log, tenant_id, memory)
    versions = []
    for record in memory.versions:
        recorded = version_at[record.version_id]
        versions.append(
            {
                "version_id": str(record.version_id),
                "number": record.position_in_memory,
                "content": contents[record.version_id],
                "erased": None
                if record.erased_by is None
                else erasure_placeholder(record.erased_by),
                "content_digest": record.content_digest,
                "size_bytes": record.size_bytes,
                "formed_from": [e.as_event_value() for e in record.excerpts],
                "principal_id": str(record.principal_id),
                "position": recorded["position"],
                "recorded_at": recorded["recorded_at"],
                "contributions": [
                    {
                        "contribution_id": str(c.contribution_id),
                        "observation_id": str(c.observation_id),
                        "proposer_id": str(c.proposer_id),
                        "model_id": c.model_id,
                        "trust": c.trust,
                        "active": c.active,
                        "deactivated_by": None
                        if c.deactivated_by is None
                        else str(c.deactivated_by),
                        "position": contribution_at[c.contribution_id],
                    }
                    for c in memory.contributions
                    if c.version_id == record.version_id
                ],
            }
        )
    return {
        "id": str(memory.id),
        "type": memory.memory_type,
        "scope": memory.scope,
        "project": memory.project,
        "topic": memory.topic,
        "erased": None if memory.erased_by is None else erasure_placeholder(memory.erased_by),
        "versions": versions,
        "edges": [
            {
                "edge_id": str(link["edge_id"]),
                "kind": link["kind"],
                "source_id": str(memory.id if link["outgoing"] else link["linked_id"]),
                "target_id": str(link["linked_id"] if link["outgoing"] else memory.id),
                "decision_id": decided.get(str(link["edge_id"])),
                "position": link["position"],
            }
            for link in links
        ],
        "events": touched,
    }
