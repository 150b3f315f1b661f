"""Raw expiry: delete observation bytes at their retention deadline.

Deadlines were fixed at capture. A pass finds due observations in the
database (never in messages), appends ``ObservationExpired`` for each, and
in that same transaction deletes the bytes unless another live observation
or a memory version still has the same content. Batches are bounded; a
killed pass leaves the rest due, and the next pass picks them up. An
observation expires once: the aggregate refuses a second expiry.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError

from domain.errors import InvalidInputError
from domain.observation import Observation
from domain.tenant import principal_id_for
from projections.store.eventlog import EventLog, WriteContext
from projections.store.sql import schema_sql
from projections.store.tenancy import known_tenants, tenant_scope, tenant_transaction

__all__ = [
    "EXPIRY_PRINCIPAL",
    "expire_due",
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


def expire_due(log: EventLog, *, now: datetime, limit: int = 100) -> int:
    """Expire up to ``limit`` due observations per tenant; return how many expired."""
    expired = 0
    for tenant_id in known_tenants(log.datastore):
        due = _due(log, tenant_id, now, limit)
        if not due:
            continue
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
                continue
            try:
                log.record(observations, WriteContext(tenant_id=tenant_id))
            except IntegrityError:
                continue  # a concurrent pass expired them first; nothing is lost
            expired += len(observations)
    return expired
