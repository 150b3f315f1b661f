"""The ``drain_index`` dramatiq actor: embed current versions for recall."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from projections.recall.indexing import index_pending
from workers.hints import hinted_drain

if TYPE_CHECKING:
    from projections.recall.embedders import Embedder
    from projections.store.eventlog import EventLog

__all__ = [
    "INDEX_ACTOR",
    "register_index_actor",
]

INDEX_ACTOR = "drain_index"


def register_index_actor(
    broker: dramatiq.Broker, log: EventLog, embedder: Embedder, *, batch: int
) -> dramatiq.Actor[[], None]:
    """Register ``drain_index`` on ``broker``: embed, in batches, the published
    versions recall has not indexed with ``embedder``'s model. The model is
    loaded once per worker process, on its first batch."""

    def run_pass() -> dict[str, int]:
        done = index_pending(log, embedder, limit=batch)
        return {"embedded": done.embedded, "marked": done.marked}

    return hinted_drain(broker, name=INDEX_ACTOR, queue="index", run_pass=run_pass)
