"""The ``decay_cycle`` dramatiq actor: the scheduled decay cycle, distributed.

Every worker's sweeper sends it a hint each minute. A hint runs
:class:`~palimpsest.projections.drains.decay_cycle.ScheduledCycle`: the cycle of every
tenant whose forgetting policy enables it and whose current slot (hourly by
default) no process has claimed yet. Any number of workers may run: the
claim of a (tenant, slot) row is the one scheduler.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dramatiq

from palimpsest.projections.drains.decay_cycle import ScheduledCycle

__all__ = ["CYCLE_ACTOR", "register_cycle_actor"]

CYCLE_ACTOR = "decay_cycle"


def register_cycle_actor(
    broker: dramatiq.Broker, scheduled: ScheduledCycle
) -> dramatiq.Actor[[], None]:
    """Register ``decay_cycle`` on ``broker``, running ``scheduled`` at each hint.

    Never retried: the next hint, and the slot's claim, make each cycle run once.
    """

    def decay_cycle() -> None:
        scheduled(datetime.now(UTC))

    decay_cycle.__name__ = CYCLE_ACTOR
    actor: dramatiq.Actor[[], None] = dramatiq.Actor(
        decay_cycle,
        broker=broker,
        actor_name=CYCLE_ACTOR,
        queue_name="cycles",
        priority=0,
        options={"max_retries": 0, "time_limit": 6 * 3600 * 1000},
    )
    return actor
