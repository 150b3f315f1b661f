"""The ``drain_raw_expiry`` dramatiq actor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dramatiq

from palimpsest.projections.drains.heartbeat import Heartbeat
from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.stages import expiry_stage, retention_stage, run_pass
from palimpsest.workers._hints import hinted_drain

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["EXPIRY_ACTOR", "register_expiry_actor"]


EXPIRY_ACTOR = "drain_raw_expiry"


def _now() -> datetime:
    return datetime.now(UTC)


def register_expiry_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int, clock: Callable[[], datetime] = _now
) -> dramatiq.Actor[[], None]:
    """Register ``drain_raw_expiry`` on ``broker``: expire due observations of ``log``.

    Like every drain, a message is a hint: due observations are found in the
    database (the tenants whose earliest deadline has passed), each expires
    once, and a run that expired anything sends itself another hint. Each
    stage and tenant fails alone, with backoff.
    """
    retention = retention_stage(log, batch=batch, clock=clock)
    expiry = expiry_stage(log, batch=batch, clock=clock)
    backoff = Backoff()

    def run_pass_once() -> dict[str, int]:
        # A tenant's shorter retention first, so expiry sees the moved deadlines.
        moved = run_pass(retention, backoff)
        expired = run_pass(expiry, backoff)
        return {"observations_expired": expired, "deadlines_shortened": moved}

    return hinted_drain(
        broker,
        name=EXPIRY_ACTOR,
        queue="expiry",
        run_pass=run_pass_once,
        heartbeat=Heartbeat(log.datastore, EXPIRY_ACTOR),
    )
