"""Which writes of a group commit cannot share its transaction, decided before it.

A group commit (:class:`palimpsest.projections.store.eventlog.GroupCommit`) gathers the
concurrent writes of a process into one transaction. Some of them certainly
conflict, with each other or with what this process committed since they were
built; the database would refuse the whole group for one of them. This module
decides which, from plain values: the versions each write records and the
versions it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from eventsourcing.persistence import IntegrityError, StoredEvent

from palimpsest.projections.store.errors import StaleReadError
from palimpsest.projections.store.ids import as_uuid

__all__ = ["conflicting"]


def conflicting(
    members: Sequence[tuple[Sequence[StoredEvent], Mapping[UUID, int]]],
    committed: Mapping[UUID, int],
) -> dict[int, Exception]:
    """Return, by index, the refusal of each write of a group (``members``: the events
    each records, and the aggregates it read without changing them, at the version
    it read) that cannot commit with
    the group, as the database would answer it but without a round trip: it takes a
    version already taken, by a write of this process that committed (``committed``:
    the last version of each aggregate such writes recorded) or by an earlier
    member kept (``IntegrityError``); or it read an aggregate at a version older than
    one committed since, or read what an earlier member kept writes, or writes what
    such a member read, or read an aggregate at another version than it did
    (``StaleReadError``).

    The database's checks would refuse such a group as a whole (the check of what
    a merged group read runs once its rows are in, or the unique key refuses a
    version), and the group would then be inserted again one savepoint per write.
    Refused here, the one write is built again from fresh aggregates while its
    neighbours commit as one. Of two writes that read one aggregate at different
    versions, the later is refused, though the earlier may be the stale one: the
    database's check then refuses the earlier too."""
    written: set[UUID] = set()
    read: dict[UUID, int] = {}
    refused: dict[int, Exception] = {}
    for index, (stored, reads) in enumerate(members):
        first: dict[UUID, int] = {}
        for event in stored:
            aggregate_id = as_uuid(event.originator_id)
            first[aggregate_id] = min(
                first.get(aggregate_id, event.originator_version), event.originator_version
            )
        if not written.isdisjoint(first) or any(committed.get(i, 0) >= v for i, v in first.items()):
            refused[index] = IntegrityError("a write of this process took the same version")
        elif (
            not read.keys().isdisjoint(first)
            or not written.isdisjoint(reads)
            or any(read.get(i, v) != v or committed.get(i, v) > v for i, v in reads.items())
        ):
            refused[index] = StaleReadError("a write of this process changed what it read")
        else:
            written.update(first)
            read.update(reads)
    return refused
