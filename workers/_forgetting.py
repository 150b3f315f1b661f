"""The ``forgetting_pass`` dramatiq actor: the scheduled forgetting pass, distributed.

Every worker's sweeper sends it a hint each minute. A hint runs
:class:`~palimpsest.projections.drains.forgetting_pass.ScheduledPass`: with the pass
off (``PALIMPSEST_FORGETTING_PASS_ENABLED`` false, or no judge) it completes
as a no-op having read nothing; on, the first worker to claim the day's row
runs the day's pass once the schedule makes it due, and every other hint
that day does nothing, unless that claim was neither finished nor renewed
within its lease (the worker died, or the pass failed): then the next hint
claims the day and runs it. Any number of workers may run: the claim is the
one scheduler.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dramatiq

from palimpsest.projections.drains.forgetting_pass import ScheduledPass

__all__ = ["FORGETTING_ACTOR", "register_forgetting_actor"]

FORGETTING_ACTOR = "forgetting_pass"


def register_forgetting_actor(
    broker: dramatiq.Broker, scheduled: ScheduledPass
) -> dramatiq.Actor[[], None]:
    """Register ``forgetting_pass`` on ``broker``, running ``scheduled`` at each hint.

    A pass can take minutes (a model judging batches), so the actor has no
    time limit and is never retried: the next hint, and the day's claim, are
    what make it happen exactly once.
    """

    def forgetting_pass() -> None:
        scheduled(datetime.now(UTC))

    forgetting_pass.__name__ = FORGETTING_ACTOR
    actor: dramatiq.Actor[[], None] = dramatiq.Actor(
        forgetting_pass,
        broker=broker,
        actor_name=FORGETTING_ACTOR,
        queue_name="forgetting",
        priority=0,
        options={"max_retries": 0, "time_limit": 24 * 3600 * 1000},
    )
    return actor
