"""Raw expiry: delete observation bytes at their retention deadline.

Deadlines were fixed at capture. A pass finds due observations in the
database (never in messages), appends ``ObservationExpired`` for each, and
in that same transaction deletes the bytes unless another live observation
or a memory version still has the same content. Batches are bounded; a
killed pass leaves the rest due, and the next pass picks them up. An
observation expires once: the aggregate refuses a second expiry. A pass
reads only tenants whose earliest deadline has passed
(:func:`palimpsest.projections.store.work_due.expiry_due`), and after each tenant's
batch records its next deadline.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.observation import Observation
from palimpsest.domain.tenant import principal_id_for
from palimpsest.projections.store.eventlog import EventLog, WriteContext
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_scope, tenant_transaction
from palimpsest.projections.store.work_due import expiry_due, recompute_expiry

__all__ = [
    "EXPIRY_PRINCIPAL",
    "expire_due",
    "expire_tenant",
]

_log = logging.getLogger(__name__)

EXPIRY_PRINCIPAL = "system:raw-expiry"
"""The principal recorded on ``ObservationExpired`` events."""


def _due(log: EventLog, tenant_id: UUID, now: datetime, limit: int) -> list[UUID]:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT observation_id FROM {schema}.observation_deadlines"
                " WHERE expired_position IS NULL AND erased_position IS NULL AND deadline <= %s"
                " ORDER BY deadline LIMIT %s",
                log.datastore.schema,
            ),
            (now, limit),
        )
        return [row["observation_id"] for row in cur]


def expire_tenant(log: EventLog, tenant_id: UUID, *, now: datetime, limit: int = 100) -> int:
    """Expire up to ``limit`` of the tenant's due observations, then record its next
    deadline; return how many expired."""
    expired = _expire(log, tenant_id, _due(log, tenant_id, now, limit), now)
    recompute_expiry(log.datastore, tenant_id)
    return expired


def _expire(log: EventLog, tenant_id: UUID, due: list[UUID], now: datetime) -> int:
    if not due:
        return 0
    principal_id = principal_id_for(tenant_id, EXPIRY_PRINCIPAL)
    with tenant_scope(tenant_id):
        observations = []
        for observation_id in due:
            try:
                observation: object = log.repository.get(observation_id)
            except AggregateNotFoundError:
                observation = None
            if not isinstance(observation, Observation):
                _log.error(
                    "due observation has no events",
                    extra={"observation_id": str(observation_id)},
                )
                continue
            try:
                observation.expire(now=now, principal_id=principal_id)
            except InvalidInputError:
                continue  # already expired by a concurrent pass
            observations.append(observation)
        if not observations:
            return 0
        try:
            log.record(observations, WriteContext(tenant_id=tenant_id))
        except IntegrityError:
            return 0  # a concurrent pass expired them first; nothing is lost
    return len(observations)


def expire_due(log: EventLog, *, now: datetime, limit: int = 100) -> int:
    """Expire up to ``limit`` due observations per tenant with a deadline passed by
    ``now``; return how many expired. A tenant's failure is raised (the drain loop
    and the workers run tenants one at a time with :func:`expire_tenant` instead)."""
    return sum(
        expire_tenant(log, tenant_id, now=now, limit=limit)
        for tenant_id in expiry_due(log.datastore, now)
    )
