"""Loading aggregates from the log: one by id through the repository, or many at once.

The write side decides from aggregates (never from a read model, which may
lag), and reads rebuild the recorded facts from them; both load them here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate, CanMutateAggregate
from eventsourcing.persistence import StoredEvent

from domain.errors import NotFoundError
from projections.store.eventlog import EventLog
from projections.store.sql import schema_query
from projections.store.tenancy import tenant_scope, tenant_transaction

__all__ = ["aggregates_at", "aggregates_of", "event_positions", "load_aggregate"]

_A = TypeVar("_A", bound=Aggregate)


def load_aggregate(
    log: EventLog, tenant_id: UUID, aggregate_id: UUID, cls: type[_A], what: str
) -> _A:
    """Return the tenant's aggregate of type ``cls``.

    Raises:
        NotFoundError: no such aggregate in the tenant (or one of another kind).
    """
    with tenant_scope(tenant_id):
        try:
            found: object = log.repository.get(aggregate_id)
        except AggregateNotFoundError:
            found = None
    if not isinstance(found, cls):
        msg = f"{what} {aggregate_id} not found"
        raise NotFoundError(msg)
    return found


def event_positions(
    log: EventLog, tenant_id: UUID, aggregate_id: UUID
) -> dict[int, tuple[int, datetime]]:
    """Return the log position and recorded time of each of an aggregate's events."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT originator_version, notification_id, recorded_at"
                " FROM {schema}.{events}"
                " WHERE originator_id = %s ORDER BY originator_version",
                log.datastore.schema,
            ),
            (aggregate_id,),
        )
        return {r["originator_version"]: (r["notification_id"], r["recorded_at"]) for r in cur}


def aggregates_at(
    cur: Any, log: EventLog, aggregate_ids: list[UUID], limit: int
) -> dict[UUID, Any]:
    """Return the aggregates of ``aggregate_ids`` as of log position ``limit``, read on
    ``cur`` (an open transaction of the tenant); ids without events are left out."""
    cur.execute(
        schema_query(
            "SELECT originator_id, originator_version, topic, state"
            " FROM {schema}.{events} WHERE originator_id = ANY(%s)"
            " AND notification_id <= %s ORDER BY originator_id, originator_version",
            log.datastore.schema,
        ),
        (aggregate_ids, limit),
    )
    aggregates: dict[UUID, Any] = {}
    for r in cur.fetchall():
        event = log.mapper.to_domain_event(
            StoredEvent(r["originator_id"], r["originator_version"], r["topic"], bytes(r["state"]))
        )
        assert isinstance(event, CanMutateAggregate)
        key = UUID(str(r["originator_id"]))
        aggregates[key] = event.mutate(aggregates.get(key))
    return aggregates


def aggregates_of(log: EventLog, tenant_id: UUID, aggregate_ids: list[UUID]) -> dict[UUID, Any]:
    """Return the tenant's aggregates of ``aggregate_ids``, rebuilt from one query for
    all their events; ids without events are left out."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        return aggregates_at(cur, log, aggregate_ids, 2**62)
