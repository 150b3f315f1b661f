"""The ``drain_revisions`` dramatiq actor."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import dramatiq

from projections.broker import DRAIN_ACTOR, DRAIN_QUEUE
from projections.drain import LEASE_SECONDS, drain_revisions

if TYPE_CHECKING:
    from projections.eventlog import EventLog

__all__ = ["register_drain_actor"]

_log = logging.getLogger(__name__)


def register_drain_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int, lease_s: float = LEASE_SECONDS
) -> dramatiq.Actor[[], None]:
    """Register ``drain_revisions`` on ``broker``, draining ``log``.

    A message carries nothing: it is a wake-up hint, and the work is found in
    the database. Delivery is at least once and a run is idempotent. A run
    that claimed anything sends itself another hint, so a backlog drains
    without waiting for the sweep.
    """

    def drain() -> None:
        report = drain_revisions(log, limit=batch, lease_s=lease_s)
        _log.info("drained", extra={"claimed": report.claimed, "published": report.published})
        if report.claimed:
            actor.send()

    actor: dramatiq.Actor[[], None] = dramatiq.Actor(
        drain,
        broker=broker,
        actor_name=DRAIN_ACTOR,
        queue_name=DRAIN_QUEUE,
        priority=0,
        options={"max_retries": 20, "min_backoff": 100, "max_backoff": 30_000},
    )
    return actor
