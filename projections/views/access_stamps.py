"""Access counts: the tuning state salience reads, stamped by reads.

Reads that return a memory's current belief stamp it (one more access, and
when). This is never an event and never changes a label; it only feeds
salience, and losing it resets ranking, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.salience import salience
from projections.store.eventlog import EventLog
from projections.store.migrations import EVENTS_TABLE
from projections.store.tenancy import tenant_transaction

__all__ = [
    "salience_from",
    "salience_of",
    "stamp_accesses",
]


def stamp_accesses(
    log: EventLog, tenant_id: UUID, memory_ids: Sequence[UUID], at: datetime
) -> None:
    """Count one access to each memory at ``at`` (a read returned it)."""
    if not memory_ids:
        return
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        # Tuning state: a crash may lose the last accesses, which only resets a
        # little ranking, so the read does not wait for a disk flush.
        cur.execute("SET LOCAL synchronous_commit = off")
        cur.execute(
            f'INSERT INTO "{log.datastore.schema}".memory_access (memory_id, accesses, last_access)'
            " SELECT id, 1, %s FROM unnest(%s::uuid[]) AS t(id)"
            " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
            " accesses = memory_access.accesses + 1,"
            " last_access = greatest(memory_access.last_access, excluded.last_access)",
            (at, sorted(set(memory_ids), key=str)),
        )


def salience_of(
    log: EventLog, tenant_id: UUID, beliefs: dict[UUID, dict[str, Any]], now: datetime
) -> dict[UUID, float]:
    """Return each memory's salience at ``now``, from its belief (confidence, pinned),
    its type, when it was first recorded, and its accesses so far."""
    if not beliefs:
        return {}
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f"SELECT m.memory_id, {SALIENCE_COLUMNS}"
            f' FROM "{schema}".memory_index m'
            f' JOIN "{schema}"."{EVENTS_TABLE}" first ON first.notification_id = m.position'
            f' LEFT JOIN "{schema}".memory_access a'
            " ON a.tenant_id = m.tenant_id AND a.memory_id = m.memory_id"
            " WHERE m.memory_id = ANY(%s)",
            (list(beliefs),),
        )
        rows = cur.fetchall()
    return {row["memory_id"]: salience_from(beliefs[row["memory_id"]], row, now) for row in rows}


SALIENCE_COLUMNS = "m.memory_type, first.recorded_at, a.accesses, a.last_access"
"""The columns :func:`salience_from` reads, for a query joining ``memory_index m``,
the events table as ``first`` (its creation) and ``memory_access a``."""


def salience_from(belief: dict[str, Any], row: dict[str, Any], now: datetime) -> float:
    """Return a memory's salience from its belief and a row of :data:`SALIENCE_COLUMNS`."""
    return salience(
        base=float(belief.get("confidence", 1.0)),
        memory_type=row["memory_type"],
        first_recorded=row["recorded_at"],
        last_access=row["last_access"],
        accesses=int(row["accesses"] or 0),
        pinned=bool(belief["labels"]["pinned"]),
        now=now,
    )
