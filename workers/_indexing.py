"""The ``drain_index`` dramatiq actor: embed current versions for recall."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from palimpsest.projections.drains.heartbeat import Heartbeat
from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.stages import index_stage, run_pass
from palimpsest.workers._hints import hinted_drain

if TYPE_CHECKING:
    from palimpsest.projections.recall.embedders import Embedder
    from palimpsest.projections.store.eventlog import EventLog

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
    loaded once per worker process, on its first batch; that process's first
    run looks at every tenant once (a model change makes their memories due
    again), later runs only at tenants with publishes not yet indexed."""
    stage = index_stage(log, embedder, batch=batch)
    backoff = Backoff()
    first = {"run": True}

    def run_pass_once() -> dict[str, int]:
        done = run_pass(stage, backoff, first=first["run"])
        first["run"] = False
        return {"indexed": done}

    return hinted_drain(
        broker,
        name=INDEX_ACTOR,
        queue="index",
        run_pass=run_pass_once,
        heartbeat=Heartbeat(log.datastore, INDEX_ACTOR),
    )
