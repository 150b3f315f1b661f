"""Read your writes: whether recall sees every write up to a log position.

A write is answered once its events commit; recall finds a memory only once the
revision drain has published it and the indexing drain has written its current
version's vectors and words, a few to a few hundred milliseconds later. So a
caller that writes and then recalls passes the ``position`` its write answered
(``after``), and the recall first waits, at most :data:`WAIT_S`, until
:func:`caught_up` holds for it (docs/recall.md, "Recall sees your writes").
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import queued_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["WAIT_S", "caught_up"]

WAIT_S = 5.0
"""The longest a recall waits for its ``after`` position to be indexed, in seconds;
then it answers with what is indexed (``caught_up: false``)."""

_CREATED_BY_AFTER = (
    "EXISTS (SELECT 1 FROM {schema}.{events} e"
    " WHERE e.originator_id = m.memory_id AND e.originator_version = 1"
    " AND e.notification_id <= %s)"
)
"""The memory's first event is at ``after`` or before (found by the events' key). Not
``memory_index.position``: writes that share a group commit's transaction record its
last position there, while each answers its own last event's, which may be lower
(seen: answered 9, recorded 13), and a recall after 9 would then wait for nothing."""

_CAUGHT_UP = (
    "SELECT NOT EXISTS (SELECT 1 FROM {schema}.revisions r"
    " JOIN {schema}.memory_index m USING (tenant_id, memory_id)"
    " WHERE r.published < r.requested AND r.published < %s"
    " AND " + _CREATED_BY_AFTER +
    # A quarantined memory is not waited for: it stays so until a later write.
    " AND r.unprojectable_at IS DISTINCT FROM r.requested)"
    " AND NOT EXISTS (SELECT 1 FROM {schema}.revisions r"
    " JOIN {schema}.memory_index m USING (tenant_id, memory_id)"
    " JOIN {schema}.beliefs b USING (tenant_id, memory_id)"
    " LEFT JOIN {schema}.memory_texts t USING (tenant_id, memory_id)"
    " WHERE r.indexed < r.published AND r.indexed < %s"
    " AND " + _CREATED_BY_AFTER + " AND m.erased_position IS NULL"
    " AND b.current_version_id IS NOT NULL"
    " AND t.version_id IS DISTINCT FROM b.current_version_id) AS caught_up"
)
"""Of the memories created at or before ``after`` (no later one was touched by a write
up to it), none is still to publish that far, and every one published since it was
last indexed has the words of its current version. The words
stand for both search rows: the indexing drain writes a version's vectors and words
in one transaction, and a model change, which re-embeds every memory, leaves the words
alone, so it does not hold up every recall until it is done. Both scans read the
partial indexes of dirty and of unindexed memories, small unless the drains lag."""


def caught_up(log: EventLog, tenant_id: UUID, after: int) -> bool:
    """Return whether a recall of ``tenant_id`` now sees every write at log position
    ``after`` or before: every memory they touched published at least that far (or
    at its newest revision), and its current version's search rows written.

    Conservative: a memory written at or before ``after`` and again since counts as
    not caught up until its newer write is published too (recall would answer it
    ``pending`` meanwhile).
    """
    # Sent whole, with its BEGIN and COMMIT, in one round trip: a recall that passes
    # ``after`` asks this first, every time.
    with queued_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(schema_query(_CAUGHT_UP, log.datastore.schema), [after] * 4)
        answer = cur.answer()
    return bool(answer.rows and answer.rows[0][0])
