"""Group commit: concurrent writes of one process share one insert transaction (one
lock, one commit, one fsync); see :class:`GroupCommit`."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.persistence import OperationalError, StoredEvent

from palimpsest.projections.store._group_conflicts import conflicting
from palimpsest.projections.store.ids import as_uuid

if TYPE_CHECKING:
    from palimpsest.projections.store._recorder import TenantScopedRecorder
    from palimpsest.projections.store._write import WriteContext

GROUP_MAX_EVENTS = 64
"""Largest write that joins a group commit (larger ones commit alone), and the
most events one group gathers."""

_COMMITTED_ENTRIES = 10_000
"""How many aggregates' last committed versions a group commit remembers (about a
megabyte): enough for the aggregates written within a retry's time."""


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Member:
    """One write waiting in a group commit, and, once done, its outcome.

    ``wake`` is held from the start; releasing it wakes this write's thread, once:
    when its group has committed, or when it is to lead the next group.
    """

    stored: Sequence[StoredEvent]
    write: WriteContext
    ids: Sequence[int] = ()
    error: BaseException | None = None
    done: bool = False
    wake: threading.Lock = field(default_factory=_held_lock)


GROUPS_AHEAD = 3
"""The most groups of one process sent and not yet answered while the next is led:
PostgreSQL runs the first, and the others wait for the events table's lock behind
it. Measured with 8 clients of the library (docs/benchmarks.md, "Groups sent
ahead"): 3 and 4 wrote more than 0 and 2; 8 less than 3, its groups smaller."""

SERVING_GROUPS_AHEAD = 0
""":data:`GROUPS_AHEAD` in a serving process (``palimpsest serve``): its Python, not
the lock, is what its writes wait for, and writes sent ahead go in smaller groups,
each a transaction's work more; 8 HTTP clients wrote a sixth less with 3
(docs/benchmarks.md, "Groups sent ahead")."""


class GroupCommit:
    """Gathers concurrent writes of this process into one insert transaction.

    A write that arrives while no group is being led commits at once (alone:
    no wait, so one client pays nothing). Writes that arrive while one is being
    led wait for it, then the first of them leads the next group: all that are
    queued by then (up to :data:`GROUP_MAX_EVENTS` events), after waiting at most
    ``window_s`` for writes still being built (:meth:`building`). Every write is
    answered only after the transaction that holds it commits, with its own
    positions or its own exception. A write that certainly conflicts, with an
    earlier one of its group or with what this process committed since it was
    built, or that read what another write of its group changes, is refused
    before the transaction (:mod:`palimpsest.projections.store._group_conflicts`), so that it
    neither costs its neighbours a refused group nor a round trip.

    A group sent in one round trip (``COMMIT`` included) hands the lead on as
    soon as it is sent, not once it is answered: the next group is composed and
    sent while PostgreSQL runs it, and waits there for the events table's lock,
    which orders their positions as it orders any two writers'. At most
    ``ahead`` groups are sent and unanswered while the next is led: its leader
    waits for one of them to be answered first (``ahead=0``: every group keeps
    the lead until it is answered). A group with a write that writes or reads
    what a group ahead writes, or stores content one stores, waits (with the
    lead) for those groups to be answered, then is checked as above. A group
    whose transaction must read an answer before its ``COMMIT`` (an idempotency
    record, a check of what it read) keeps the lead until it is answered.

    A group sent ahead waits for the events table's lock within the log's lock
    timeout (``PALIMPSEST_DB_LOCK_TIMEOUT_S``), as any write does; a group that
    keeps the lead makes the writes behind it wait in this process.
    """

    def __init__(
        self,
        recorder: TenantScopedRecorder,
        window_s: float = 0.0005,
        ahead: int = GROUPS_AHEAD,
    ) -> None:
        self.recorder = recorder
        self.window_s = window_s
        self.ahead = ahead
        self.sizes: collections.deque[int] = collections.deque(maxlen=1000)
        """Writes in each recent transaction of more than one (for tests and figures)."""
        self._mutex = threading.Lock()
        self._answered = threading.Condition(self._mutex)
        """Notified when a group sent ahead is answered (a leader may wait for room)."""
        self._queue: collections.deque[_Member] = collections.deque()
        self._leader: _Member | None = None
        """The write whose thread leads the next group (None: no group is being led)."""
        self._building = 0
        self._sent: list[list[_Member]] = []
        """The groups sent ahead and not yet answered, oldest first."""
        self._committed: dict[UUID, int] = {}
        """The last version of recently written aggregates, by the writes of this
        process that committed
        (:func:`palimpsest.projections.store._group_conflicts.conflicting`)."""

    @property
    def leading(self) -> bool:
        """Whether a write leads a group now, neither sent ahead nor answered yet (for
        tests)."""
        with self._mutex:
            return self._leader is not None

    @property
    def unanswered(self) -> int:
        """Groups sent ahead and not answered yet (for tests)."""
        with self._mutex:
            return len(self._sent)

    @property
    def queued(self) -> int:
        """Writes waiting for the next group (for tests)."""
        with self._mutex:
            return len(self._queue)

    def building(self) -> _Building:
        """Return a context manager a writer holds while it builds a write that will
        join: a group about to commit waits (up to ``window_s``) for it."""
        return _Building(self)

    def commit(self, stored: Sequence[StoredEvent], write: WriteContext) -> Sequence[int]:
        """Commit one write's events with the group; return their log positions.

        Raises:
            IntegrityError, StaleReadError, DataError, DatabaseError: the database
                refused this write (its neighbours are not affected).
            OperationalError, InterfaceError: the database could not be written.
        """
        member = _Member(stored, write)
        with self._mutex:
            leads = self._leader is None
            self._queue.append(member)
            if leads:
                self._leader = member
        try:
            if not leads:
                # Woken once: its group committed, or it is first in the queue and
                # leads. (One lock per writer, not a shared condition: a shared one
                # wakes every waiting writer at each commit, to find most not done.)
                member.wake.acquire()
            if not member.done:
                self._lead_then_hand_over(member)
        except BaseException:
            # Interrupted (Ctrl-C in an import) while it waited or was about to lead:
            # not written if no group took it yet, and the lead is never lost with it.
            self._withdraw(member)
            raise
        if member.error is not None:
            raise member.error
        return member.ids

    def _lead_then_hand_over(self, leader: _Member) -> None:
        """Commit a group (``leader``'s own write is first in the queue, so in it), and
        wake the next in the queue to lead (or stop leading), once the group is sent
        in one round trip or else once it is answered; then wake its other writers."""
        group: list[_Member] = []
        sending = _Sending(self)
        try:
            self._lead(group, sending)
        finally:
            sending.answered()
            unwritten = [m for m in group if not m.done]
            if unwritten:  # taken from the queue, then the leader was interrupted
                taken = {id(m) for m in unwritten}
                with self._mutex:
                    self._queue = collections.deque(m for m in self._queue if id(m) not in taken)
                for member in unwritten:
                    member.error = OperationalError(
                        "the write's group commit was interrupted before its insert:"
                        " nothing of it was written"
                    )
                    member.done = True
            if sending.handed_over:
                pass  # the next group was led while this one ran
            elif leader.done:
                self._hand_over()
            else:
                self._withdraw(leader)  # interrupted before it took its own write
            for member in group:
                if member is not leader:
                    member.wake.release()

    def _hand_over(self) -> None:
        """Make the first queued write the leader and wake it (or stop leading)."""
        with self._mutex:
            following = self._leader = self._queue[0] if self._queue else None
        if following is not None:
            following.wake.release()

    def _withdraw(self, member: _Member) -> None:
        """Take out of the queue a write whose thread was interrupted, handing the lead on
        if it had it (a write a group already took stays in it). Safe to repeat."""
        with self._mutex:
            self._queue = collections.deque(m for m in self._queue if m is not member)
            led = self._leader is member
        if led:
            self._hand_over()

    def _lead(self, group: list[_Member], sending: _Sending) -> None:
        """Take the next group from the queue into ``group`` (as it goes, so that the
        caller answers every write taken, even if this is interrupted), once fewer
        than ``ahead`` groups are sent ahead, and commit it (``sending`` is called
        once it is sent in one round trip)."""
        with self._mutex:
            while self._sent and len(self._sent) >= self.ahead:
                self._answered.wait()
        self._take(group)
        live = group  # the writes the transaction holds (all, until some are refused)
        try:
            refused = self._conflicting(group)
            for index, error in refused.items():
                group[index].error = error
            live = sending.live = [m for i, m in enumerate(group) if i not in refused]
            if len(live) == 1:
                # Alone: the pipelined insert, with no savepoint to pay for.
                live[0].ids = (
                    self.recorder.insert_events(live[0].stored, write=live[0].write, sent=sending)
                    or ()
                )
            elif live:  # (none when every write was refused: no transaction at all)
                results = self.recorder.insert_group([(m.stored, m.write) for m in live], sending)
                self.sizes.append(len(live))
                for member, result in zip(live, results, strict=True):
                    if isinstance(result, Exception):
                        member.error = result
                    else:
                        member.ids = result
            self._remember([m for m in live if m.error is None])
        except BaseException as e:  # every writer of the group is answered, never left waiting
            for member in live:
                member.error = e
        finally:
            for member in group:
                member.done = True

    def _take(self, group: list[_Member]) -> None:
        """Move the next group's writes from the queue into ``group``: as many as
        :data:`GROUP_MAX_EVENTS` allows, after waiting up to ``window_s`` for writes
        still being built."""
        deadline = time.monotonic() + self.window_s
        while self._building and time.monotonic() < deadline:
            time.sleep(self.window_s / 5)
        with self._mutex:
            events = 0
            while self._queue and (
                not group or events + len(self._queue[0].stored) <= GROUP_MAX_EVENTS
            ):
                group.append(self._queue[0])
                self._queue.popleft()
                events += len(group[-1].stored)

    def _conflicting(self, group: list[_Member]) -> dict[int, Exception]:
        """Return, by index, the refusals of ``group``'s writes that conflict with an
        earlier one of it or with what this process committed
        (:func:`~palimpsest.projections.store._group_conflicts.conflicting`), once no group sent
        ahead writes what one of them writes or reads.

        Such a group waits for the groups ahead to be answered, as it would have
        queued behind them: refused at once, its write would be built again from
        the same versions (theirs are not committed yet) and refused again, until
        its writer gave up. So does a group that stores content a group ahead
        stores: one of them may insert that payload row before the events table's
        lock and the other under it, and each would wait for the other in
        PostgreSQL until its deadlock check, a second later."""
        with self._mutex:
            # (Only groups ahead leave meanwhile: none can be sent while this one leads.)
            if self._sent:
                touched = {as_uuid(e.originator_id) for m in group for e in m.stored}
                touched.update(i for m in group for i in m.write.read_versions)
                contents = {digest for m in group for digest in m.write.payloads}
                while any(
                    not contents.isdisjoint(m.write.payloads)
                    or any(as_uuid(e.originator_id) in touched for e in m.stored)
                    for sent in self._sent
                    for m in sent
                ):
                    self._answered.wait()
            return conflicting([(m.stored, m.write.read_versions) for m in group], self._committed)

    def _remember(self, committed: list[_Member]) -> None:
        """Note the last version of each aggregate the committed members recorded,
        forgetting the oldest beyond a bound."""
        with self._mutex:  # (the leader of a group sent behind reads it)
            for member in committed:
                for event in member.stored:
                    aggregate_id = as_uuid(event.originator_id)
                    self._committed.pop(aggregate_id, None)  # the newest last
                    self._committed[aggregate_id] = event.originator_version
            while len(self._committed) > _COMMITTED_ENTRIES:
                del self._committed[next(iter(self._committed))]


class _Sending:
    """One group's lead, handed on once the group is sent (called by the insert), if
    the group commit lets groups run ahead; :meth:`answered` ends its time ahead."""

    def __init__(self, commit: GroupCommit) -> None:
        self.commit = commit
        self.live: list[_Member] = []
        """The writes the group's transaction holds (set before it is sent)."""
        self.ahead = False
        """Whether the group is among those sent ahead (until :meth:`answered`)."""
        self.handed_over = False
        """Whether the next group's leader was woken (its leader then wakes no one)."""

    def __call__(self) -> None:
        """The group's round trip is on its way: the next group may be led (once; a
        transaction tried again is not sent ahead again)."""
        commit = self.commit
        if self.ahead or commit.ahead < 1:
            return
        with commit._mutex:
            commit._sent.append(self.live)
            self.ahead = True
        commit._hand_over()
        self.handed_over = True

    def answered(self) -> None:
        """The group is answered (or its leader was interrupted): it is no longer ahead."""
        if not self.ahead:
            return
        commit = self.commit
        with commit._mutex:
            commit._sent = [g for g in commit._sent if g is not self.live]
            commit._answered.notify_all()


class _Building:
    def __init__(self, group: GroupCommit) -> None:
        self.group = group

    def __enter__(self) -> None:
        with self.group._mutex:
            self.group._building += 1

    def __exit__(self, *_: object) -> None:
        with self.group._mutex:
            self.group._building -= 1
