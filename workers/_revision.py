"""The ``drain_revisions`` dramatiq actor."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from palimpsest.projections.drains.heartbeat import Heartbeat
from palimpsest.projections.drains.hints import DRAIN_ACTOR, DRAIN_QUEUE
from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.revision import LEASE_SECONDS
from palimpsest.projections.drains.stages import revision_stage, run_pass
from palimpsest.workers._hints import hinted_drain

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["register_drain_actor"]


def register_drain_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int, lease_s: float = LEASE_SECONDS
) -> dramatiq.Actor[[], None]:
    """Register ``drain_revisions`` on ``broker``, draining ``log``.

    A message carries nothing: it is a wake-up hint, and the work is found in
    the database (the tenants marked dirty). Delivery is at least once and a
    run is idempotent. A run that claimed anything sends itself another hint,
    so a backlog drains without waiting for the sweep. A tenant whose batch
    fails is logged, counted and backed off; the others go on.
    """
    stage = revision_stage(log, batch=batch, lease_s=lease_s)
    backoff = Backoff()

    def run_pass_once() -> dict[str, int]:
        return {"claimed": run_pass(stage, backoff)}

    return hinted_drain(
        broker,
        name=DRAIN_ACTOR,
        queue=DRAIN_QUEUE,
        run_pass=run_pass_once,
        heartbeat=Heartbeat(log.datastore, DRAIN_ACTOR),
    )
