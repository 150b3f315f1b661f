"""Recorded decay cycles: each one's report, as its ``CycleCompleted`` event holds it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["cycle_report"]


def cycle_report(log: EventLog, tenant_id: UUID, cycle_id: UUID) -> dict[str, Any] | None:
    """Return the report of the tenant's cycle ``cycle_id`` (None: no such cycle),
    with its id, the log position that recorded it, and ``dry_run`` false."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT report, position FROM {schema}.decay_cycles WHERE cycle_id = %s",
                log.datastore.schema,
            ),
            (cycle_id,),
        )
        row = cur.fetchone()
    if row is None:
        return None
    report: dict[str, Any] = dict(row["report"])
    return {**report, "cycle_id": cycle_id, "dry_run": False, "position": row["position"]}
