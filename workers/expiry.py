"""The ``drain_raw_expiry`` dramatiq actor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dramatiq

from projections.drains.expiry import expire_due
from projections.drains.retention import apply_retention
from workers.hints import hinted_drain

if TYPE_CHECKING:
    from projections.store.eventlog import EventLog

__all__ = ["EXPIRY_ACTOR", "register_expiry_actor"]


EXPIRY_ACTOR = "drain_raw_expiry"


def _now() -> datetime:
    return datetime.now(UTC)


def register_expiry_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int, clock: Callable[[], datetime] = _now
) -> dramatiq.Actor[[], None]:
    """Register ``drain_raw_expiry`` on ``broker``: expire due observations of ``log``.

    Like every drain, a message is a hint: due observations are found in the
    database, each expires once, and a run that expired a full batch sends
    itself another hint.
    """

    def run_pass() -> dict[str, int]:
        # A tenant's shorter retention first, so expiry sees the moved deadlines.
        moved = apply_retention(log, now=clock(), limit=batch)
        expired = expire_due(log, now=clock(), limit=batch)
        return {"observations_expired": expired, "deadlines_shortened": moved}

    return hinted_drain(broker, name=EXPIRY_ACTOR, queue="expiry", run_pass=run_pass)
