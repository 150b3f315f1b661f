"""The dramatiq broker that carries wake-up hints, shared by senders and workers."""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker

__all__ = [
    "DRAIN_ACTOR",
    "DRAIN_QUEUE",
    "broker_for",
    "send_drain_hint",
]

DRAIN_ACTOR = "drain_revisions"
DRAIN_QUEUE = "revisions"


def broker_for(url: str) -> dramatiq.Broker:
    """Return a Redis or RabbitMQ broker for ``url``."""
    if url.startswith(("amqp://", "amqps://")):
        return RabbitmqBroker(url=url)
    return RedisBroker(url=url)  # type: ignore[no-untyped-call]


def send_drain_hint(broker: dramatiq.Broker) -> None:
    """Send a ``drain_revisions`` wake-up hint (it carries no data)."""
    broker.enqueue(
        dramatiq.Message(
            queue_name=DRAIN_QUEUE, actor_name=DRAIN_ACTOR, args=(), kwargs={}, options={}
        )
    )
