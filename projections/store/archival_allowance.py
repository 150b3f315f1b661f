"""The collapse guard's allowance: how many memories a tenant's day may see archived.

Applying proposals, the decay cycle's automatic archives and consolidation's
automatic merges all archive (forget, or supersede) memories without a person
forgetting each one; together they may archive at most
``max(minimum, floor(share * the tenant's memories))`` memories a UTC day, where
the memories counted are those not erased (``memory_index``, written in the
transaction of the events that create and erase them, so the count never lags
the log as a read model would; archived memories are counted too: they are the
tenant's, restorable, and nothing written with the events says which are
archived).

A write that archives carries an :class:`ArchivalClaim` in its
:class:`~palimpsest.projections.store.eventlog.WriteContext`; the recorder reserves it in
the write's own transaction, before the events table's lock, with one
conditional ``UPDATE`` of the tenant's row of that day (:func:`reserve_archivals`).
Concurrent writes queue on that row, and each sees what those before it
committed, so together they never archive past the allowance; a refused write
rolls back whole, events included. Memories an administrator confirmed past the
guard are counted and never refused: what they spend, the day's automatic
archives no longer have.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

from palimpsest.domain.errors import CollapseGuardError
from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor

__all__ = [
    "ArchivalClaim",
    "archivals_left",
    "reserve_archivals",
]

_ALLOWANCE: LiteralString = (
    "(SELECT greatest(%(minimum)s, floor(%(share)s * count(*)))::bigint"
    " FROM {schema}.memory_index WHERE erased_position IS NULL)"
)
"""The day's allowance, in memories: the guard's share of the tenant's memories that
are not erased, and never less than its minimum."""


@dataclass(frozen=True)
class ArchivalClaim:
    """The memories one write archives, to be reserved from its tenant's allowance of
    ``day`` (UTC)."""

    day: date
    guarded: int
    """Memories the allowance must hold: the write is refused if it cannot."""
    confirmed: int
    """Memories an administrator confirmed past the guard: counted, never refused."""
    share: float
    minimum: int

    def plus(self, other: ArchivalClaim) -> ArchivalClaim:
        """Return both claims as one (two specs of one write archive together)."""
        return replace(
            self,
            guarded=self.guarded + other.guarded,
            confirmed=self.confirmed + other.confirmed,
        )


def _parameters(claim: ArchivalClaim) -> dict[str, Any]:
    return {
        "day": claim.day,
        "guarded": claim.guarded,
        "total": claim.guarded + claim.confirmed,
        "share": claim.share,
        "minimum": claim.minimum,
    }


def reserve_archivals(curs: Cursor[Any], schema: str, claim: ArchivalClaim) -> None:
    """Reserve ``claim`` in the transaction on ``curs`` (its tenant set), waiting for
    the answer.

    The day's row is inserted if missing (a concurrent first insert waits for the
    other and does nothing), then updated only if what the day archived so far plus
    the claim's guarded memories stays within the allowance. PostgreSQL evaluates
    that condition again on the row as the last committed write left it, once the
    row lock is had (READ COMMITTED), so two writes never both take the last of it.

    Raises:
        CollapseGuardError: the allowance cannot hold the claim's guarded memories
            (the transaction must roll back: nothing of the write is recorded).
    """
    parameters = _parameters(claim)
    curs.execute(
        schema_query(
            "INSERT INTO {schema}.archival_allowance (day) VALUES (%(day)s) ON CONFLICT DO NOTHING",
            schema,
        ),
        parameters,
    )
    curs.execute(
        schema_query(
            "UPDATE {schema}.archival_allowance SET archived = archived + %(total)s"
            " WHERE day = %(day)s AND (%(guarded)s = 0 OR archived + %(guarded)s <= "
            + _ALLOWANCE
            + ") RETURNING archived",
            schema,
        ),
        parameters,
    )
    if curs.fetchone() is None:
        msg = (
            f"archiving {claim.guarded} more memories would pass the collapse guard's"
            f" allowance for {claim.day.isoformat()}; an administrator may confirm"
            " (confirm_bulk)"
        )
        raise CollapseGuardError(msg)


def archivals_left(
    datastore: PostgresDatastore, tenant_id: UUID, day: date, *, share: float, minimum: int
) -> int:
    """Return how many memories the tenant's allowance of ``day`` still holds (0 when
    spent, or overspent by confirmations): what a caller may plan to archive. Only
    the reservation in the write's transaction decides."""
    claim = ArchivalClaim(day, 0, 0, share, minimum)
    with tenant_transaction(datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT "
                + _ALLOWANCE
                + " - coalesce((SELECT archived FROM {schema}.archival_allowance"
                " WHERE day = %(day)s), 0) AS remaining",
                datastore.schema,
            ),
            _parameters(claim),
        )
        row = cur.fetchone()
    return 0 if row is None else max(0, int(row["remaining"]))
