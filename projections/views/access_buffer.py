"""Access stamps buffered in this process and written in batches, off the read path.

A read that serves a memory to use counts one access
(:mod:`palimpsest.projections.views.access_stamps`). Writing that count in the
read's own transaction cost every read by id a second transaction; instead each
stamp merges into this process's buffer (one entry per memory: how many
accesses, and the latest), and a flush thread of the buffer's own writes the
buffer every :data:`FLUSH_INTERVAL_S`, one statement per tenant. The buffer is
bounded (:data:`MAX_PENDING` memories): a stamp that finds it full flushes it on
its own thread, so a flush thread that cannot keep up slows reads rather than
losing counts.

What a read reports still counts every access so far: a memory's salience adds
the stamps this process holds (:meth:`AccessBuffer.unwritten`), and readers that
read the counts in SQL only (recall's fade label, the decay cycle) first write the
tenant's buffered stamps (:func:`flush_accesses`). Exactly once: a read whose row
was read before a flush committed adds that flush's counts, one read after it
does not (told apart by the totals the flush's statement returned), and a read
whose memory is being flushed waits for that flush to end.

A crash loses the buffer: at most :data:`FLUSH_INTERVAL_S` of accesses (and what a
flush that failed put back). They only feed salience, which is tuning state; no
answer, label or event depends on them. ``Runtime.close`` flushes what is left.

Other processes see a stamp once it is written; memory ids are UUIDs drawn by the
server, so a merge by memory id alone (recall's rows carry no tenant) never adds
one tenant's accesses to another's memory.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import queued_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "AccessBuffer",
    "FLUSH_INTERVAL_S",
    "MAX_PENDING",
    "access_buffer",
    "close_access_buffer",
    "flush_accesses",
    "merged_accesses",
]

FLUSH_INTERVAL_S = 0.25
"""How long a stamp waits in the buffer at most before the flush thread writes it."""

MAX_PENDING = 50_000
"""Memories the buffer holds at most; a stamp beyond flushes on the reader's thread."""

_COMMITTED_KEEP_S = 30.0
"""How long a flush's totals are kept, for reads whose row predates it."""

_log = logging.getLogger(__name__)


@dataclass
class _Pending:
    """One memory's accesses not written yet."""

    tenant_id: UUID
    count: int
    last: datetime


@dataclass(frozen=True)
class _Written:
    """One memory's accesses a flush wrote: the row's total once it committed."""

    total: int
    count: int
    last: datetime
    at_s: float


class AccessBuffer:
    """The stamps of one event log's process, written by a flush thread."""

    def __init__(
        self,
        log: EventLog,
        *,
        interval_s: float = FLUSH_INTERVAL_S,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._log = log
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._lock = threading.Lock()  # the three maps
        self._flushing = threading.Lock()  # one flush at a time, ended before merges see it
        self._pending: dict[UUID, _Pending] = {}
        self._inflight: dict[UUID, _Pending] = {}
        self._written: dict[UUID, list[_Written]] = {}
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def add(self, tenant_id: UUID, memory_ids: Iterable[UUID], at: datetime) -> None:
        """Count one access to each memory at ``at``."""
        with self._lock:
            for memory_id in memory_ids:
                entry = self._pending.get(memory_id)
                if entry is None:
                    self._pending[memory_id] = _Pending(tenant_id, 1, at)
                else:
                    entry.count += 1
                    entry.last = max(entry.last, at)
            full = len(self._pending) >= self._max_pending
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="palimpsest-access-flush", daemon=True
                )
                self._thread.start()
        if full:
            self.flush()

    def unwritten(self, memory_id: UUID, accesses: int | None) -> list[tuple[int, datetime]]:
        """Return the accesses (count, latest) this process holds of a memory that its
        row, read before this call with ``accesses``, does not include."""
        with self._lock:
            busy = memory_id in self._inflight
        if busy:  # its flush may have committed after the row was read: wait for its totals
            with self._flushing:
                pass
        row = accesses or 0
        with self._lock:
            extra = [(w.count, w.last) for w in self._written.get(memory_id, ()) if row < w.total]
            pending = self._pending.get(memory_id)
            if pending is not None:
                extra.append((pending.count, pending.last))
        return extra

    def flush(self, tenant_id: UUID | None = None) -> int:
        """Write the buffered stamps (of ``tenant_id`` only, if given) now; return how
        many memories' stamps were written. Stamps a failed write held go back into
        the buffer."""
        with self._flushing:
            with self._lock:
                taken = {
                    m: e
                    for m, e in self._pending.items()
                    if tenant_id is None or e.tenant_id == tenant_id
                }
                for memory_id in taken:
                    del self._pending[memory_id]
                self._inflight = taken
            if not taken:
                return 0
            try:
                totals = self._write(taken)
            except Exception:
                with self._lock:
                    self._inflight = {}
                    for memory_id, entry in taken.items():
                        self._put_back(memory_id, entry)
                raise
            now_s = time.monotonic()
            with self._lock:
                self._inflight = {}
                for memory_id, total in totals.items():
                    entry = taken[memory_id]
                    kept = [
                        w
                        for w in self._written.get(memory_id, ())
                        if now_s - w.at_s < _COMMITTED_KEEP_S
                    ]
                    kept.append(_Written(total, entry.count, entry.last, now_s))
                    self._written[memory_id] = kept
                self._forget_old(now_s)
            return len(taken)

    def close(self) -> None:
        """Stop the flush thread and write what is left."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(10)
        self.flush()

    def _put_back(self, memory_id: UUID, entry: _Pending) -> None:
        """Merge a stamp a failed flush held into the buffer again (under the lock)."""
        pending = self._pending.get(memory_id)
        if pending is None:
            self._pending[memory_id] = entry
        else:
            pending.count += entry.count
            pending.last = max(pending.last, entry.last)

    def _forget_old(self, now_s: float) -> None:
        """Drop the totals of flushes too old for a read to predate (under the lock)."""
        old = [m for m, ws in self._written.items() if now_s - ws[-1].at_s >= _COMMITTED_KEEP_S]
        for memory_id in old:
            del self._written[memory_id]

    def _write(self, taken: Mapping[UUID, _Pending]) -> dict[UUID, int]:
        """Write ``taken``, one transaction a tenant; return each memory's total after."""
        by_tenant: dict[UUID, list[tuple[UUID, _Pending]]] = {}
        for memory_id, entry in taken.items():
            by_tenant.setdefault(entry.tenant_id, []).append((memory_id, entry))
        totals: dict[UUID, int] = {}
        schema = self._log.datastore.schema
        for tenant_id, entries in by_tenant.items():
            entries.sort(key=lambda e: str(e[0]))  # one order: no deadlock between processes
            # Not durable: tuning state, which a crash may lose anyway. Only memories that
            # still exist: a tenant's or memory's erasure may have run since the read.
            with queued_transaction(
                self._log.datastore, tenant_id, commit=True, durable=False
            ) as cur:
                cur.execute(
                    schema_query(
                        "INSERT INTO {schema}.memory_access (memory_id, accesses, last_access)"
                        " SELECT t.id, t.n, t.at"
                        " FROM unnest(%s::uuid[], %s::int[], %s::timestamptz[]) AS t(id, n, at)"
                        " JOIN {schema}.memory_index m ON m.memory_id = t.id"
                        " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                        " accesses = memory_access.accesses + excluded.accesses,"
                        " last_access = greatest(memory_access.last_access, excluded.last_access)"
                        " RETURNING memory_id, accesses",
                        schema,
                    ),
                    (
                        [m for m, _ in entries],
                        [e.count for _, e in entries],
                        [e.last for _, e in entries],
                    ),
                )
                answer = cur.answer()
            totals.update({row[0]: int(row[1]) for row in answer.rows})
        return totals

    def _run(self) -> None:
        """The flush thread: write the buffer every interval until closed."""
        while True:
            self._wake.wait(self._interval_s)
            with self._lock:
                closed = self._closed
            if closed:
                return
            try:
                self.flush()
            except Exception:  # the stamps went back; try again next interval
                _log.warning("access stamps not written; kept for the next flush", exc_info=True)


_buffers: weakref.WeakKeyDictionary[EventLog, AccessBuffer] = weakref.WeakKeyDictionary()
_buffers_lock = threading.Lock()


def access_buffer(log: EventLog) -> AccessBuffer:
    """Return the access buffer of ``log``'s process (one per event log, made on first
    use; its flush thread starts with its first stamp)."""
    with _buffers_lock:
        buffer = _buffers.get(log)
        if buffer is None:
            buffer = _buffers[log] = AccessBuffer(log)
        return buffer


def flush_accesses(log: EventLog, tenant_id: UUID | None = None) -> int:
    """Write the buffered stamps of ``log``'s process now (of ``tenant_id`` only, if
    given): for readers of the counts in SQL, and for tests that read the table."""
    with _buffers_lock:
        buffer = _buffers.get(log)
    return 0 if buffer is None else buffer.flush(tenant_id)


def close_access_buffer(log: EventLog) -> None:
    """Stop ``log``'s flush thread and write what is left (at shutdown)."""
    with _buffers_lock:
        buffer = _buffers.pop(log, None)
    if buffer is not None:
        buffer.close()


def merged_accesses(
    memory_id: Any, accesses: int | None, last_access: datetime | None
) -> tuple[int, datetime | None]:
    """Return a memory's accesses and last access from its row plus the stamps this
    process holds of it (:meth:`AccessBuffer.unwritten`, over every live buffer)."""
    with _buffers_lock:
        buffers = list(_buffers.values())
    count, last = accesses or 0, last_access
    if not isinstance(memory_id, UUID):
        return count, last
    for buffer in buffers:
        for more, at in buffer.unwritten(memory_id, accesses):
            count += more
            last = at if last is None else max(last, at)
    return count, last
