"""Drain actors: a message is a hint, the work is found in the database."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import dramatiq

from palimpsest.projections.drains.heartbeat import Heartbeat

__all__ = [
    "hinted_drain",
]

_log = logging.getLogger(__name__)


def hinted_drain(
    broker: dramatiq.Broker,
    *,
    name: str,
    queue: str,
    run_pass: Callable[[], Mapping[str, int]],
    heartbeat: Heartbeat | None = None,
) -> dramatiq.Actor[[], None]:
    """Register actor ``name`` on ``broker``: each message runs one drain pass.

    ``run_pass`` does one bounded pass and returns what it did (counts, logged
    as one structured line). A pass that did anything sends another hint, so a
    backlog drains without waiting for the sweep; a failing pass is retried
    with backoff. Delivery is at least once, so a pass must be idempotent. Each pass
    that completes beats ``heartbeat`` (``/readyz`` of a ``serve`` with a broker
    reads it, :mod:`palimpsest.projections.drains.heartbeat`).
    """

    def drain() -> None:
        done = run_pass()
        if heartbeat is not None:
            heartbeat.beat()
        _log.info("drain pass", extra={"actor": name, **done})
        if any(done.values()):
            actor.send()

    drain.__name__ = name
    actor: dramatiq.Actor[[], None] = dramatiq.Actor(
        drain,
        broker=broker,
        actor_name=name,
        queue_name=queue,
        priority=0,
        options={"max_retries": 20, "min_backoff": 100, "max_backoff": 30_000},
    )
    return actor
