"""What became of a write whose connection failed after its ``COMMIT`` was sent.

Every write path sends a ``COMMIT`` whose answer may be lost: a pipelined or queued
write sends its whole transaction at once (:mod:`palimpsest.projections.store._pipelined`,
:mod:`palimpsest.projections.store.queued`), a batch of more than 64 events and a group
written one write at a time send it last (``told_transaction``). If the connection
fails after that, or its backend is ended, the backend may have committed it, or
may still (one waiting for the events table's lock commits once it has the lock).
Trying the write again before that transaction is over could record it twice. So
the writer waits until the backend has no transaction left, then looks in the log:
the write's events, byte for byte, mean it committed; none of them mean it did not,
and trying again is safe. A write tried again all the same (its first outcome not
told) and refused by a unique key is looked for in the log the same way
(:func:`recorded_positions`): its own earlier commit is not another writer's win.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from psycopg import sql

from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.tenancy import read_transaction, tenant_transaction

if TYPE_CHECKING:
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.postgres import PostgresDatastore

__all__ = ["recorded_positions", "transaction_ended"]

_POLL_S = 0.05


def transaction_ended(datastore: PostgresDatastore, backend_pid: int, timeout_s: float) -> bool:
    """Wait until backend ``backend_pid`` is gone or idle (its transaction over,
    committed or not); return whether that happened within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        with read_transaction(datastore) as cur:
            cur.execute("SELECT state FROM pg_stat_activity WHERE pid = %s", (backend_pid,))
            row = cur.fetchone()
        if row is None or row["state"] == "idle":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(_POLL_S)


def recorded_positions(
    datastore: PostgresDatastore, table: str, tenant_id: UUID | None, stored: Sequence[StoredEvent]
) -> list[int] | None:
    """Return the log positions of ``stored`` (one write's events, of ``tenant_id``) if
    the log holds every one of them as it is; None if it holds them not all, or
    another write's events at their versions."""
    with tenant_transaction(datastore, tenant_id, commit=False) as cur:
        cur.execute(
            sql.SQL(
                "SELECT e.originator_id, e.originator_version, e.notification_id, e.state"
                " FROM {schema}.{table} e"
                " JOIN unnest(%s::uuid[], %s::bigint[]) AS w(id, version)"
                " ON e.originator_id = w.id AND e.originator_version = w.version"
            ).format(schema=sql.Identifier(datastore.schema), table=sql.Identifier(table)),
            (
                [as_uuid(event.originator_id) for event in stored],
                [event.originator_version for event in stored],
            ),
        )
        found = {
            (row["originator_id"], row["originator_version"]): (
                row["notification_id"],
                bytes(row["state"]),
            )
            for row in cur.fetchall()
        }
    positions = []
    for event in stored:
        position, state = found.get(
            (as_uuid(event.originator_id), event.originator_version), (None, None)
        )
        if position is None or state != event.state:
            return None
        positions.append(int(position))
    return positions
