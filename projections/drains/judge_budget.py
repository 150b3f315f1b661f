"""The forgetting pass's daily budget of judge calls and tokens, per tenant.

Metered like any paid call: **reserve** before sending (one call and the
tokens the request may cost, refused when either would pass the tenant's
daily cap), **record** what the server reported once it answered (the
reservation is corrected to it), **release** the reservation when the call
failed. A reservation is one conditional ``UPDATE`` on the tenant's row of
the day, so concurrent passes can never together spend past the cap. Usage
is also counted on ``/metrics`` as the operation ``memory.forget.decide``
(:mod:`palimpsest.projections.drains.counters`, read by each app at scrape time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.projections.drains.counters import JUDGE_REFUSED, JUDGE_USAGE, count
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "OPERATION",
    "Reservation",
    "record",
    "release",
    "reserve",
    "usage_on",
]

OPERATION = "memory.forget.decide"
"""The metered operation every judge call of the forgetting pass counts as."""


@dataclass(frozen=True)
class Reservation:
    """One reserved judge call and the tokens it may cost, on a tenant's day."""

    tenant_id: UUID
    day: date
    tokens: int


def reserve(
    log: EventLog, tenant_id: UUID, day: date, *, tokens: int, daily_calls: int, daily_tokens: int
) -> Reservation | None:
    """Reserve one call and ``tokens`` on the tenant's ``day``; None (and nothing
    reserved) when that would pass ``daily_calls`` or ``daily_tokens``."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.judge_usage (day) VALUES (%s) ON CONFLICT DO NOTHING",
                schema,
            ),
            (day,),
        )
        cur.execute(
            schema_sql(
                "UPDATE {schema}.judge_usage SET calls = calls + 1, tokens = tokens + %s"
                " WHERE day = %s AND calls + 1 <= %s AND tokens + %s <= %s RETURNING calls",
                schema,
            ),
            (tokens, day, daily_calls, tokens, daily_tokens),
        )
        granted = cur.fetchone() is not None
    if not granted:
        count(JUDGE_REFUSED, OPERATION)
        return None
    return Reservation(tenant_id, day, tokens)


def record(
    log: EventLog, reservation: Reservation, *, calls: int, prompt: int, completion: int
) -> None:
    """Correct a reservation to what the server reported: the requests it took (a
    judge may split a batch) and their tokens."""
    _adjust(log, reservation, calls=calls - 1, tokens=prompt + completion - reservation.tokens)
    count(JUDGE_USAGE, "calls", calls)
    count(JUDGE_USAGE, "prompt_tokens", prompt)
    count(JUDGE_USAGE, "completion_tokens", completion)


def release(log: EventLog, reservation: Reservation) -> None:
    """Give back a reservation whose call failed."""
    _adjust(log, reservation, calls=-1, tokens=-reservation.tokens)


def _adjust(log: EventLog, reservation: Reservation, *, calls: int, tokens: int) -> None:
    with tenant_transaction(log.datastore, reservation.tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.judge_usage SET calls = greatest(calls + %s, 0),"
                " tokens = greatest(tokens + %s, 0) WHERE day = %s",
                log.datastore.schema,
            ),
            (calls, tokens, reservation.day),
        )


def usage_on(log: EventLog, tenant_id: UUID, day: date) -> tuple[int, int]:
    """Return the tenant's (calls, tokens) of ``day``."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT calls, tokens FROM {schema}.judge_usage WHERE day = %s",
                log.datastore.schema,
            ),
            (day,),
        )
        row = cur.fetchone()
    return (0, 0) if row is None else (int(row["calls"]), int(row["tokens"]))
