"""The dramatiq broker that carries wake-up hints, shared by senders and workers.

A hint is sent after a write has committed, so it is best effort: a broker
that is down costs a delay (the workers' sweep finds the work anyway), never
the write's answer. A hint that could not be sent is logged as one structured
line and counted (``palimpsest_hints_unsent_total`` on ``/metrics``).
"""

from __future__ import annotations

import logging

import dramatiq

from palimpsest.projections.drains.counters import HINTS_UNSENT, count

__all__ = [
    "DRAIN_ACTOR",
    "DRAIN_QUEUE",
    "broker_for",
    "send_drain_hint",
]

_log = logging.getLogger(__name__)

DRAIN_ACTOR = "drain_revisions"
DRAIN_QUEUE = "revisions"


def broker_for(url: str) -> dramatiq.Broker:
    """Return a Redis or RabbitMQ broker for ``url``.

    The broker clients (redis, pika) are the ``distributed`` extra, imported only
    here: an embedded deployment never needs them.
    """
    if url.startswith(("amqp://", "amqps://")):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return RabbitmqBroker(url=url)
    from dramatiq.brokers.redis import RedisBroker

    return RedisBroker(url=url)  # type: ignore[no-untyped-call]


def send_drain_hint(broker: dramatiq.Broker) -> None:
    """Send a ``drain_revisions`` wake-up hint (it carries no data).

    Never raises: the write it follows has committed, and its caller must get
    that write's answer.
    """
    try:
        broker.enqueue(
            dramatiq.Message(
                queue_name=DRAIN_QUEUE, actor_name=DRAIN_ACTOR, args=(), kwargs={}, options={}
            )
        )
    except Exception as e:  # any broker failure: the sweep finds the work anyway
        count(HINTS_UNSENT, DRAIN_QUEUE)
        _log.warning(
            "drain hint not sent",
            extra={"queue": DRAIN_QUEUE, "error": type(e).__name__, "error_detail": str(e)},
        )
