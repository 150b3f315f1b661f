"""The retention drain: apply a tenant's shorter retention to deadlines already set.

Deadlines are fixed at capture (``ObservationCaptured``). When a tenant
shortens its retention (``RetentionSet``), each observation whose deadline
is later than its capture time plus the new retention gets an
``ObservationDeadlineShortened`` event (never later than now), in bounded
batches, one write per batch. A killed pass leaves the rest to the next. A
later lengthening finds nothing to do: deadlines never move later. Captures
racing the policy change are caught by the next pass. A pass reads only
tenants marked for retention (a policy change, or a capture in a tenant
that has one: :mod:`palimpsest.projections.store.work_due`); one with nothing left to
move is recorded done.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from uuid import UUID

from eventsourcing.persistence import IntegrityError
from psycopg import sql

from palimpsest.domain.observation import Observation
from palimpsest.domain.tenant import principal_id_for
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.unit_of_work import UnitOfWork
from palimpsest.projections.store.eventlog import EventLog, WriteContext
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_scope, tenant_transaction
from palimpsest.projections.store.work_due import marked_tenants, note_done

__all__ = [
    "RETENTION_PRINCIPAL",
    "apply_retention",
    "apply_tenant_retention",
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


def apply_tenant_retention(
    log: EventLog, tenant_id: UUID, seen: int, *, now: datetime, limit: int = 500
) -> int:
    """Shorten up to ``limit`` of the tenant's deadlines; return how many moved. With
    none to move, record the tenant done as of mark ``seen`` (read before calling)."""
    candidates, policy = _candidates(log, tenant_id, now, limit)
    if not candidates or policy is None:
        note_done(log.datastore, tenant_id, "retention", seen)
        return 0
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
            return 0
        try:
            log.record(changed, WriteContext(tenant_id=tenant_id))
        except IntegrityError:
            return 0  # a concurrent pass (or expiry) moved first; the next pass sees it
    return len(changed)


def apply_retention(log: EventLog, *, now: datetime, limit: int = 500) -> int:
    """Shorten up to ``limit`` deadlines per tenant marked for retention; return how
    many moved. A tenant's failure is raised (the drain loop and the workers run
    tenants one at a time with :func:`apply_tenant_retention` instead)."""
    return sum(
        apply_tenant_retention(log, tenant_id, seen, now=now, limit=limit)
        for tenant_id, seen in marked_tenants(log.datastore, "retention").items()
    )
