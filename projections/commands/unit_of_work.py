"""One request's unit of work: the caller, the aggregates it loads and changes,
and the payloads it stores, recorded together in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

from eventsourcing.domain import Aggregate

from palimpsest.domain.digest import content_digest
from palimpsest.domain.errors import InvalidInputError, NotFoundError
from palimpsest.domain.observation import Observation
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.store.aggregates import aggregates_of, unreadable_of
from palimpsest.projections.store.errors import MemoryUnprojectableError
from palimpsest.projections.store.eventlog import EventLog, WriteContext
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "Item",
    "UnitOfWork",
]

_A = TypeVar("_A", bound=Aggregate)


@dataclass(frozen=True)
class Item:
    """What one write produced: its primary id and the event that ends it."""

    id: UUID
    last_event: tuple[UUID, int] | None
    """The event whose position the response reports; None when nothing was recorded."""
    fields: dict[str, Any]
    position: int | None = None
    """The log position to report when ``last_event`` is None (a replayed decision)."""


class UnitOfWork:
    """Aggregates and payloads of one request, saved together."""

    def __init__(self, log: EventLog, caller: Caller) -> None:
        self.log = log
        self.caller = caller
        self.aggregates: dict[UUID, Aggregate] = {}
        self.context = WriteContext(tenant_id=caller.tenant_id)

    def load(self, aggregate_id: UUID, cls: type[_A], what: str) -> _A:
        found = self.aggregates.get(aggregate_id)
        if found is None:
            loaded = aggregates_of(self.log, self.caller.tenant_id, [aggregate_id])
            poison = unreadable_of(loaded, aggregate_id)
            if poison is not None:  # refused as its reads are, not "not found"
                raise MemoryUnprojectableError(aggregate_id, poison.reason)
            found = loaded.get(aggregate_id)
        if not isinstance(found, cls):
            # Unknown, another tenant's, or another kind: all look the same.
            msg = f"{what} {aggregate_id} not found"
            raise NotFoundError(msg)
        self.aggregates[found.id] = found
        return found

    def preload(self, aggregate_ids: list[UUID]) -> None:
        """Load many aggregates at once: one query for all their events.

        A withdrawal can touch tens of thousands of memories; loading them one by
        one costs two round trips each. Ids already held, or unknown, are skipped
        (``load`` still decides what is found).
        """
        wanted = [i for i in aggregate_ids if i not in self.aggregates]
        if not wanted:
            return
        loaded = aggregates_of(self.log, self.caller.tenant_id, wanted)
        for aggregate in loaded.values():
            if isinstance(aggregate, Aggregate):
                self.aggregates[aggregate.id] = aggregate

    def add(self, aggregate: Aggregate) -> None:
        self.aggregates[aggregate.id] = aggregate

    def store_payload(self, data: bytes) -> str:
        digest = content_digest(data)
        self.context.payloads[digest] = data
        return digest

    def content_of(self, observation: Observation) -> str:
        data = self.context.payloads.get(observation.digest)
        if data is None:
            with tenant_transaction(self.log.datastore, self.caller.tenant_id, commit=False) as cur:
                cur.execute(
                    schema_sql(
                        "SELECT content FROM {schema}.payloads WHERE digest = %s",
                        self.log.datastore.schema,
                    ),
                    (observation.digest,),
                )
                row = cur.fetchone()
            if row is None:
                msg = f"observation {observation.id} has no content left to cite"
                raise InvalidInputError(msg)
            data = bytes(row["content"])
        return data.decode("utf-8")
