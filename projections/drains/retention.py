"""The retention drain: apply a tenant's shorter retention to deadlines already set.

Deadlines are fixed at capture (``ObservationCaptured``). When a tenant
shortens its retention (``RetentionSet``), each observation whose deadline
is later than its capture time plus the new retention gets an
``ObservationDeadlineShortened`` event (never later than now), in bounded
batches, one write per batch. A killed pass leaves the rest to the next. A
later lengthening finds nothing to do: deadlines never move later. Captures
racing the policy change are caught by the next pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from eventsourcing.persistence import IntegrityError
from psycopg import sql

from domain.observation import Observation
from domain.tenant import principal_id_for
from projections.commands.caller import Caller
from projections.commands.unit_of_work import UnitOfWork
from projections.store.eventlog import EventLog, WriteContext
from projections.store.schema import EVENTS_TABLE
from projections.store.sql import schema_sql
from projections.store.tenancy import known_tenants, tenant_scope, tenant_transaction

__all__ = [
    "RETENTION_PRINCIPAL",
    "apply_retention",
]

RETENTION_PRINCIPAL = "system:retention"
"""The principal recorded on ``ObservationDeadlineShortened`` events."""

_LONGER = sql.SQL(
    "SELECT o.observation_id, e.recorded_at FROM {schema}.observation_deadlines o"
    " JOIN {schema}.{events} e"
    " ON e.originator_id = o.observation_id AND e.originator_version = 1"
    " WHERE o.expired_position IS NULL AND o.erased_position IS NULL AND o.deadline > %s"
    " AND o.deadline > e.recorded_at + make_interval(hours =>"
    " CASE WHEN o.transient THEN %s ELSE %s END)"
    " ORDER BY o.deadline LIMIT %s"
)


def _candidates(
    log: EventLog, tenant_id: UUID, now: datetime, limit: int
) -> tuple[list[tuple[UUID, datetime]], tuple[int, int] | None]:
    """Return unexpired observations whose deadline is later than their capture
    plus the tenant's retention for their kind (raw or transient)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql("SELECT raw_hours, transient_hours FROM {schema}.tenant_retention", schema)
        )
        policy = cur.fetchone()
        if policy is None:
            return [], None
        cur.execute(
            _LONGER.format(schema=sql.Identifier(schema), events=sql.Identifier(EVENTS_TABLE)),
            (now, policy["transient_hours"], policy["raw_hours"], limit),
        )
        rows = [(row["observation_id"], row["recorded_at"]) for row in cur]
    return rows, (policy["raw_hours"], policy["transient_hours"])


def apply_retention(log: EventLog, *, now: datetime, limit: int = 500) -> int:
    """Shorten up to ``limit`` deadlines per tenant; return how many moved."""
    moved = 0
    for tenant_id in known_tenants(log.datastore):
        candidates, policy = _candidates(log, tenant_id, now, limit)
        if not candidates or policy is None:
            continue
        principal_id = principal_id_for(tenant_id, RETENTION_PRINCIPAL)
        uow = UnitOfWork(log, Caller(tenant_id, principal_id, RETENTION_PRINCIPAL, "admin"))
        with tenant_scope(tenant_id):
            uow.preload([observation_id for observation_id, _ in candidates])
            changed = []
            for observation_id, received_at in candidates:
                observation = uow.aggregates.get(observation_id)
                if not isinstance(observation, Observation):
                    continue
                hours = policy[1] if observation.transient else policy[0]
                deadline = received_at + timedelta(hours=hours)
                if observation.shorten_deadline(deadline, now=now, principal_id=principal_id):
                    changed.append(observation)
            if not changed:
                continue
            try:
                log.record(changed, WriteContext(tenant_id=tenant_id))
            except IntegrityError:
                continue  # a concurrent pass (or expiry) moved first; the next pass sees it
            moved += len(changed)
    return moved
