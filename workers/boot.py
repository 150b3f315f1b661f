"""Entry point of distributed drain workers: ``dramatiq workers.boot``.

Reads ``BROKER_URL`` and the database settings, connects, registers the
actors and starts a sweeper that sends a hint every sweep interval, so that a
lost message or a killed worker delays work and never loses it. Migrations
are not run here: run ``palimpsest migrate`` (or ``serve``) first.
"""

from __future__ import annotations

import threading

import dramatiq

from projections.drains.hints import broker_for
from projections.drains.settings import DrainSettings
from projections.recall.settings import EmbeddingSettings
from projections.store.database import open_database
from projections.store.eventlog import EventLog
from projections.store.settings import DatabaseSettings
from workers.erasure import register_erasure_actor
from workers.expiry import register_expiry_actor
from workers.indexing import register_index_actor
from workers.revision import register_drain_actor

_settings = DrainSettings()
if _settings.broker_url is None:
    raise SystemExit("palimpsest: error: BROKER_URL must be set for distributed workers")
_database_settings = DatabaseSettings()
_database = open_database(_database_settings)
_log_store = EventLog(env=_database.event_store_env(_database_settings))
broker = broker_for(_settings.broker_url.get_secret_value())
dramatiq.set_broker(broker)
drain = register_drain_actor(
    broker, _log_store, batch=_settings.drain_batch, lease_s=_settings.drain_lease_s
)


expiry = register_expiry_actor(broker, _log_store, batch=_settings.drain_batch)
erasure = register_erasure_actor(broker, _log_store, batch=_settings.drain_batch)
index = register_index_actor(
    broker, _log_store, EmbeddingSettings().make_embedder(), batch=_settings.drain_batch
)


def _sweep() -> None:
    stop = threading.Event()
    while not stop.wait(_settings.sweep_interval_s):
        drain.send()
        expiry.send()
        erasure.send()
        index.send()


drain.send()  # work left by a previous run
expiry.send()
erasure.send()
index.send()
threading.Thread(target=_sweep, name="palimpsest-sweep", daemon=True).start()
