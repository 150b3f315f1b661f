"""Entry point of distributed drain workers: ``dramatiq palimpsest.workers.boot``.

Reads ``BROKER_URL`` and the database settings, connects, registers the
actors and starts a sweeper that sends a hint every sweep interval, so that a
lost message or a killed worker delays work and never loses it. Migrations
are not run here: run ``palimpsest migrate`` (or ``serve``) first. Each actor
runs its stages one tenant at a time (a failing tenant is backed off, the others
go on); see :mod:`palimpsest.projections.drains.stages`.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import dramatiq

from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.counters import HINTS_UNSENT, count
from palimpsest.projections.drains.decay_cycle import ScheduledCycle
from palimpsest.projections.drains.forgetting_pass import ScheduledPass
from palimpsest.projections.drains.hints import broker_for
from palimpsest.projections.drains.settings import DrainSettings, ForgettingPassSettings
from palimpsest.projections.judgment.importance import configured_importance
from palimpsest.projections.judgment.settings import JudgeSettings, judge_from
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.runtime import table_writers
from palimpsest.projections.store.database import open_database
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.workers._cycles import register_cycle_actor
from palimpsest.workers._erasure import register_erasure_actor
from palimpsest.workers._expiry import register_expiry_actor
from palimpsest.workers._forgetting import register_forgetting_actor
from palimpsest.workers._indexing import register_index_actor
from palimpsest.workers._revision import register_drain_actor

_log = logging.getLogger(__name__)
_settings = DrainSettings()
if _settings.broker_url is None:
    raise SystemExit("palimpsest: error: BROKER_URL must be set for distributed workers")
_database_settings = DatabaseSettings()
_database = open_database(_database_settings)
_log_store = EventLog(env=_database.event_store_env(_database_settings), writers=table_writers())
broker = broker_for(_settings.broker_url.get_secret_value())
dramatiq.set_broker(broker)
drain = register_drain_actor(
    broker, _log_store, batch=_settings.drain_batch, lease_s=_settings.drain_lease_s
)


expiry = register_expiry_actor(broker, _log_store, batch=_settings.drain_batch)
erasure = register_erasure_actor(broker, _log_store, batch=_settings.drain_batch)
_embedder = EmbeddingSettings().make_embedder()
configured_importance()  # refuse to start on bad PALIMPSEST_IMPORTANCE_* settings
index = register_index_actor(broker, _log_store, _embedder, batch=_settings.drain_batch)
forgetting = register_forgetting_actor(
    broker,
    ScheduledPass(
        _log_store,
        # The pass writes proposals only: no capture, so no retention is ever read.
        Writer(
            _log_store,
            CapturePolicy(raw_retention=timedelta(0), transient_retention=timedelta(0)),
            clock=lambda: datetime.now(UTC),
        ),
        judge_from(JudgeSettings()),
        ForgettingPassSettings(),
        lambda: _embedder.model_id,
    ),
)
cycles = register_cycle_actor(
    broker,
    ScheduledCycle(
        _log_store,
        # The cycle writes proposals, fades and archivals only: no capture.
        Writer(
            _log_store,
            CapturePolicy(raw_retention=timedelta(0), transient_retention=timedelta(0)),
            clock=lambda: datetime.now(UTC),
        ),
        lambda: _embedder.model_id,
    ),
)
_FORGETTING_HINT_S = 60.0
"""How often each sweeper hints the scheduled pass (it is due once a day)."""


def _sweep() -> None:
    """Send each actor a hint every sweep interval; a broker that is down costs this
    sweep's hints (logged and counted), never the sweeper."""
    stop = threading.Event()
    last_forgetting_hint = 0.0
    while not stop.wait(_settings.sweep_interval_s):
        actors = [drain, expiry, erasure, index]
        if time.monotonic() - last_forgetting_hint >= _FORGETTING_HINT_S:
            actors.extend((forgetting, cycles))
            last_forgetting_hint = time.monotonic()
        for actor in actors:
            try:
                actor.send()
            except Exception as e:  # the next sweep tries again
                count(HINTS_UNSENT, actor.queue_name)
                _log.warning(
                    "drain hint not sent",
                    extra={"queue": actor.queue_name, "error": type(e).__name__},
                )


drain.send()  # work left by a previous run
expiry.send()
erasure.send()
index.send()
threading.Thread(target=_sweep, name="palimpsest-sweep", daemon=True).start()
