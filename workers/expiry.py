"""The ``drain_raw_expiry`` dramatiq actor."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dramatiq

from projections.expiry import expire_due
from projections.retention import apply_retention

if TYPE_CHECKING:
    from projections.eventlog import EventLog

__all__ = ["EXPIRY_ACTOR", "register_expiry_actor"]

_log = logging.getLogger(__name__)

EXPIRY_ACTOR = "drain_raw_expiry"


def register_expiry_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int
) -> dramatiq.Actor[[], None]:
    """Register ``drain_raw_expiry`` on ``broker``: expire due observations of ``log``.

    Like every drain, a message is a hint: due observations are found in the
    database, each expires once, and a run that expired a full batch sends
    itself another hint.
    """

    def drain_raw_expiry() -> None:
        # A tenant's shorter retention first, so expiry sees the moved deadlines.
        moved = apply_retention(log, now=datetime.now(UTC), limit=batch)
        expired = expire_due(log, now=datetime.now(UTC), limit=batch)
        _log.info("expired", extra={"observations": expired, "deadlines_shortened": moved})
        if expired or moved:
            actor.send()

    actor: dramatiq.Actor[[], None] = dramatiq.Actor(
        drain_raw_expiry,
        broker=broker,
        actor_name=EXPIRY_ACTOR,
        queue_name="expiry",
        priority=0,
        options={"max_retries": 20, "min_backoff": 100, "max_backoff": 30_000},
    )
    return actor
