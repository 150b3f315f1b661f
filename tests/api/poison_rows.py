"""Poison rows written straight into the events table, as an older release, a bad
migration or a disk fault would leave them: below the write path, with the marks
the write path would have made (so the drain finds the memory dirty)."""

from __future__ import annotations

import json
from typing import Any, Literal
from uuid import UUID, uuid4

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE

__all__ = ["KINDS", "Kind", "insert_event", "insert_poison"]

Kind = Literal["undecodable", "unknown-topic", "missing-field", "bad-timestamp", "bad-uuid"]
KINDS: tuple[Kind, ...] = (
    "undecodable",
    "unknown-topic",
    "missing-field",
    "bad-timestamp",
    "bad-uuid",
)


def _pinned(**fields: Any) -> bytes:
    """A ``Pinned`` event's state as the transcoder writes it, with ``fields`` changed."""
    state: dict[str, Any] = {
        "timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-01T00:00:00+00:00"},
        "decision_id": {"_type_": "uuid_hex", "_data_": uuid4().hex},
        "principal_id": {"_type_": "uuid_hex", "_data_": uuid4().hex},
    }
    for name, value in fields.items():
        if value is None:
            del state[name]
        else:
            state[name] = value
    return json.dumps(state).encode()


def _row(kind: Kind) -> tuple[str, bytes]:
    """The topic and state of a poison event of ``kind``."""
    pinned = "palimpsest:MemoryPinned"
    if kind == "undecodable":
        return pinned, b"\xff\xfe not json \x00"
    if kind == "unknown-topic":
        return "palimpsest:MemoryTeleported", _pinned()
    if kind == "missing-field":
        return pinned, _pinned(principal_id=None, decision_id=None)
    if kind == "bad-timestamp":
        return pinned, _pinned(timestamp={"_type_": "datetime_iso", "_data_": "yesterday-ish"})
    return pinned, _pinned(principal_id={"_type_": "uuid_hex", "_data_": "not-a-uuid"})


def insert_poison(runtime: Runtime, tenant_id: UUID, memory_id: UUID, kind: Kind) -> int:
    """Append a poison event of ``kind`` to the memory and mark it dirty at its
    position; return the position."""
    return insert_event(runtime, tenant_id, memory_id, *_row(kind))


def insert_event(
    runtime: Runtime, tenant_id: UUID, memory_id: UUID, topic: str, state: bytes
) -> int:
    """Append an event of ``topic`` with ``state`` to the memory, below the write path,
    and mark the memory dirty at its position; return the position."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'INSERT INTO "{schema}"."{EVENTS_TABLE}"'
            " (tenant_id, originator_id, originator_version, topic, state)"
            " SELECT %s, %s, coalesce(max(originator_version), 0) + 1, %s, %s"
            f' FROM "{schema}"."{EVENTS_TABLE}" WHERE originator_id = %s'
            " RETURNING notification_id",
            (tenant_id, memory_id, topic, state, memory_id),
        ).fetchone()
        assert row is not None
        position = int(row[0])
        conn.execute(
            f'UPDATE "{schema}".revisions SET requested = %s WHERE tenant_id = %s'
            " AND memory_id = %s",
            (position, tenant_id, memory_id),
        )
        conn.execute(
            f'UPDATE "{schema}".revision_tenants SET marked_position = %s WHERE tenant_id = %s',
            (position, tenant_id),
        )
        conn.commit()
    return position
