"""The event log: the eventsourcing application that records palimpsest's events.

:class:`EventLog` records a write's events in one transaction with what must be
atomic with them (:class:`WriteContext`), through its tenant-scoped recorder
(:mod:`palimpsest.projections.store._recorder`), alone or in a group commit
shared with concurrent writes of the process
(:mod:`palimpsest.projections.store._group_commit`). The tables features keep in
step with the log are written by the
writers (:class:`~palimpsest.projections.store.table_writers.TableWriter`) it is
made with: the store names none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, Snapshot
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    EventStore,
    JSONTranscoder,
    Mapper,
    Notification,
    Recording,
    UUIDAsHex,
)

from palimpsest.domain.dependency import Rules, dependencies_of
from palimpsest.domain.memory import Memory
from palimpsest.projections.store._group_commit import (
    GROUP_MAX_EVENTS,
    GROUPS_AHEAD,
    SERVING_GROUPS_AHEAD,
    GroupCommit,
)
from palimpsest.projections.store._group_inserts import WRITE_ATTEMPTS
from palimpsest.projections.store._log_sql import PAYLOADS_UNDER_LOCK_BYTES
from palimpsest.projections.store._recorder import (
    TenantScopedRecorder,
    TenantScopedSnapshotRecorder,
)
from palimpsest.projections.store._transcodings import SNAPSHOT_TRANSCODINGS
from palimpsest.projections.store._write import (
    IdempotencyRecord,
    Positions,
    TokenRow,
    WriteContext,
)
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE
from palimpsest.projections.store.table_writers import storable_rows

if TYPE_CHECKING:
    from eventsourcing.domain import DomainEventProtocol
    from eventsourcing.postgres import PostgresDatastore

    from palimpsest.projections.store.table_writers import TableWriter

__all__ = [
    "EventLog",
    "GROUPS_AHEAD",
    "GROUP_MAX_EVENTS",
    "GroupCommit",
    "IdempotencyRecord",
    "PAYLOADS_UNDER_LOCK_BYTES",
    "Positions",
    "SERVING_GROUPS_AHEAD",
    "SNAPSHOT_INTERVAL",
    "TenantScopedRecorder",
    "TokenRow",
    "WRITE_ATTEMPTS",
    "WriteContext",
    "event_mapper",
]

SNAPSHOT_INTERVAL = 100
"""Events between snapshots of one memory."""


def event_mapper() -> Mapper[UUID]:
    """Return a mapper that decodes this log's events and snapshots, with no
    application attached (for replay workers in other processes)."""
    # Explicit topics resolve only once their classes are defined: import them all.
    import palimpsest.domain.decision
    import palimpsest.domain.memory
    import palimpsest.domain.observation
    import palimpsest.domain.tenant  # noqa: F401

    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO(), *SNAPSHOT_TRANSCODINGS):
        transcoder.register(transcoding)
    return Mapper(transcoder=transcoder)


class EventLog(Application[UUID]):
    """The palimpsest event log (table ``palimpsest_events``).

    One instance per process; it owns the process's connection pool, which
    the projections reuse through :attr:`datastore`. Memories are snapshotted
    every :data:`SNAPSHOT_INTERVAL` events, so loading one (to write, or to
    read it as of a position) replays at most that many events.
    """

    name = "palimpsest"
    is_snapshotting_enabled = True

    def __init__(
        self, env: Mapping[str, str] | None = None, *, writers: Sequence[TableWriter]
    ) -> None:
        """Open the log with ``env`` (the library's settings: where the database is)
        and ``writers``, the tables kept in step with it in every write's
        transaction (``palimpsest.projections.runtime.table_writers()`` gives every
        process the same ones)."""
        super().__init__(env=env)
        self.writers = tuple(writers)
        self._rules = Rules(rule for writer in self.writers for rule in writer.rules)
        recorder = self.recorder
        assert isinstance(recorder, TenantScopedRecorder)
        recorder.writers = self.writers

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        """Register the library's transcodings and those of snapshot state."""
        super().register_transcodings(transcoder)
        for transcoding in SNAPSHOT_TRANSCODINGS:
            transcoder.register(transcoding)

    def construct_snapshot_store(self) -> EventStore[UUID]:
        """Return the snapshot store, on the tenant-scoped snapshots table."""
        recorder = self.recorder
        assert isinstance(recorder, TenantScopedRecorder)
        return EventStore(
            mapper=self.mapper,
            recorder=TenantScopedSnapshotRecorder(
                recorder.datastore, events_table_name=SNAPSHOTS_TABLE
            ),
        )

    def snapshot_due(self, aggregates: Iterable[Aggregate], recorded: int) -> None:
        """Snapshot the memories whose version crossed a multiple of the interval.

        Runs after the write committed, in its own transaction (as the library's
        ``save()`` does): a snapshot that fails to be written costs only speed.
        """
        due = [
            a
            for a in aggregates
            if isinstance(a, Memory)
            and a.version // SNAPSHOT_INTERVAL > (a.version - recorded) // SNAPSHOT_INTERVAL
        ]
        if due and self.snapshots is not None:
            self.snapshots.put([Snapshot.take(a) for a in due])

    @property
    def group(self) -> GroupCommit:
        """Return this process's group commit (made on first use)."""
        found: GroupCommit | None = self.__dict__.get("_group")
        if found is None:
            recorder = self.recorder
            assert isinstance(recorder, TenantScopedRecorder)
            found = self.__dict__.setdefault("_group", GroupCommit(recorder))
        return found

    def record(
        self, aggregates: Iterable[Aggregate], write: WriteContext, *, grouped: bool = False
    ) -> list[Recording[UUID]]:
        """Record the pending events of ``aggregates`` in one transaction with ``write``.

        ``grouped``: the transaction may hold concurrent writes of this process too
        (:class:`GroupCommit`), when this one has at most :data:`GROUP_MAX_EVENTS`
        events and reserves no archivals; it is answered, as alone, only after that
        transaction commits.

        This is ``save()`` without its per-object protocol dispatch, which
        cost a tenth of a 100-memory batch; this application has no snapshot
        or notification hooks for ``save()`` to run.

        ``aggregates`` with no pending events are what the write read: it
        commits only if none of them has changed since (``StaleReadError``
        otherwise, and nothing is written).

        Returns:
            One recording (event and log position) per event, in order.

        Raises:
            CollapseGuardError: ``write.archivals`` would pass the collapse guard's
                allowance (nothing is written).
        """
        aggregates = list(aggregates)
        pending = {a.id: len(a.pending_events) for a in aggregates}
        write.read_versions = {a.id: a.version for a in aggregates if not pending[a.id]}
        write.loaded = frozenset(pending)
        events = [event for aggregate in aggregates for event in aggregate.collect_events()]
        # Read-model rows hold text PostgreSQL can store, whatever the events carry.
        write.dependencies = storable_rows(dependencies_of(events, self._rules))
        if grouped and len(events) <= GROUP_MAX_EVENTS and write.archivals is None:
            recordings = self._put_grouped(events, write)
        else:
            recordings = self.events.put(events, write=write)
        for aggregate in aggregates:
            if pending[aggregate.id]:
                self.snapshot_due([aggregate], pending[aggregate.id])
        return recordings

    def _put_grouped(
        self, events: Sequence[DomainEventProtocol[UUID]], write: WriteContext
    ) -> list[Recording[UUID]]:
        """``EventStore.put``, with the insert made by the group commit."""
        stored = [self.mapper.to_stored_event(e) for e in events]
        ids = self.group.commit(stored, write)
        return [
            Recording(
                d,
                Notification(
                    originator_id=s.originator_id,
                    originator_version=s.originator_version,
                    topic=s.topic,
                    state=s.state,
                    id=n,
                ),
            )
            for d, s, n in zip(events, stored, ids, strict=True)
        ]

    @property
    def datastore(self) -> PostgresDatastore:
        """Return the connection pool of the runtime role."""
        recorder = self.recorder
        assert isinstance(recorder, TenantScopedRecorder)
        return recorder.datastore
