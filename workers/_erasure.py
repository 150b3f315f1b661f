"""The ``drain_erasure`` dramatiq actor: tenant deletions, a batch at a time."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from palimpsest.projections.drains.heartbeat import Heartbeat
from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.stages import erasure_stage, run_pass
from palimpsest.workers._hints import hinted_drain

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["ERASURE_ACTOR", "register_erasure_actor"]


ERASURE_ACTOR = "drain_erasure"


def register_erasure_actor(
    broker: dramatiq.Broker, log: EventLog, *, batch: int
) -> dramatiq.Actor[[], None]:
    """Register ``drain_erasure`` on ``broker``: erase tenants being deleted.

    An erasure request does its own work in its transaction; a tenant deletion
    is too large for one, so this drain erases what is left of each closed
    tenant, ``batch`` observations and memories per write (at most the
    erasure's limit), and completes the deletion when nothing is left. A
    message is a hint: the work is found in the database, and a run that
    erased anything sends itself another hint. Each tenant fails alone, with
    backoff.
    """
    stage = erasure_stage(log, batch=batch)
    backoff = Backoff()

    return hinted_drain(
        broker,
        name=ERASURE_ACTOR,
        queue="erasure",
        run_pass=lambda: {"erased": run_pass(stage, backoff)},
        heartbeat=Heartbeat(log.datastore, ERASURE_ACTOR),
    )
