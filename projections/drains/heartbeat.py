"""The drains' heartbeats: each dramatiq drain records in the database when it last
completed a pass, so a process that runs no drain (``serve`` with ``BROKER_URL``)
can tell a worker pool that died from one that is merely idle.

A dramatiq pool whose main process exits (it does when one of its worker
processes is killed) leaves the broker's messages unread and the work in the
database: nothing else notices. ``/readyz`` reads :func:`drain_progress` and
turns unready when work waits and no drain has beaten for
``PALIMPSEST_DRAIN_STALL_S``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import read_transaction

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore

__all__ = ["BEAT_INTERVAL_S", "DrainProgress", "Heartbeat", "drain_progress"]

_log = logging.getLogger(__name__)

BEAT_INTERVAL_S = 5.0
"""How often at most a drain records its beat (an idle worker passes every sweep: a
write per pass would be a write per second per actor)."""


class Heartbeat:
    """One drain's beat: :meth:`beat` after each completed pass records the time (at
    most every ``interval_s``) and the worker (host and pid). Best effort: a beat the
    database refuses is logged, and the next pass tries again."""

    def __init__(
        self,
        datastore: PostgresDatastore,
        drain: str,
        *,
        interval_s: float = BEAT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.datastore = datastore
        self.drain = drain
        self.interval_s = interval_s
        self.clock = clock
        self._last: float | None = None

    def beat(self) -> None:
        """Record that the drain completed a pass now (unless it did within the interval)."""
        now = self.clock()
        if self._last is not None and now - self._last < self.interval_s:
            return
        try:
            with self.datastore.transaction(commit=True) as cur:
                cur.execute(
                    schema_sql(
                        "INSERT INTO {schema}.drain_heartbeats (drain, worker, beat_at)"
                        " VALUES (%s, %s, clock_timestamp()) ON CONFLICT (drain) DO UPDATE"
                        " SET worker = excluded.worker, beat_at = excluded.beat_at",
                        self.datastore.schema,
                    ),
                    (self.drain, f"{socket.gethostname()}:{os.getpid()}"),
                )
        except Exception as e:  # the pass is done; only its report is lost
            _log.warning(
                "drain heartbeat not recorded", extra={"drain": self.drain, "error": str(e)}
            )
            return
        self._last = now


@dataclass(frozen=True)
class DrainProgress:
    """Whether drain work waits, and how long ago a drain last completed a pass."""

    work_waiting: bool
    """A tenant has revisions to publish or versions to index."""
    beat_age_s: float | None
    """Seconds since the latest beat of any drain (None: none ever beat)."""

    def stalled(self, bound_s: float) -> bool:
        """Whether work waits and no drain has beaten for ``bound_s`` seconds."""
        return self.work_waiting and (self.beat_age_s is None or self.beat_age_s > bound_s)


def drain_progress(datastore: PostgresDatastore) -> DrainProgress:
    """Read whether drain work waits and the latest beat (one statement, two index
    lookups and a scan of one row per drain)."""
    with read_transaction(datastore) as cur:
        cur.execute(
            schema_sql(
                "SELECT EXISTS (SELECT 1 FROM {schema}.revision_tenants"
                "  WHERE marked_position > drained_position)"
                " OR EXISTS (SELECT 1 FROM {schema}.index_tenants WHERE marked > indexed)"
                " AS waiting,"
                " (SELECT extract(epoch FROM clock_timestamp() - max(beat_at))"
                "  FROM {schema}.drain_heartbeats) AS age_s",
                datastore.schema,
            )
        )
        row = cur.fetchone()
    assert row is not None
    age = row["age_s"]
    return DrainProgress(bool(row["waiting"]), None if age is None else float(age))
