"""The ``drain_revisions`` dramatiq actor."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from projections.drains.hints import DRAIN_ACTOR, DRAIN_QUEUE
from projections.drains.revision import LEASE_SECONDS, drain_revisions
from workers.hints import hinted_drain

if TYPE_CHECKING:
    from projections.store.eventlog import EventLog

__all__ = ["register_drain_actor"]


def register_drain_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int, lease_s: float = LEASE_SECONDS
) -> dramatiq.Actor[[], None]:
    """Register ``drain_revisions`` on ``broker``, draining ``log``.

    A message carries nothing: it is a wake-up hint, and the work is found in
    the database. Delivery is at least once and a run is idempotent. A run
    that claimed anything sends itself another hint, so a backlog drains
    without waiting for the sweep.
    """

    def run_pass() -> dict[str, int]:
        report = drain_revisions(log, limit=batch, lease_s=lease_s)
        return {"claimed": report.claimed, "published": report.published}

    return hinted_drain(broker, name=DRAIN_ACTOR, queue=DRAIN_QUEUE, run_pass=run_pass)
