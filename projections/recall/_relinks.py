"""Memories indexed ahead of a backlog, inserted into the vector index again once the
backlog has passed them.

Each indexing batch takes a quarter of the tenant's newest due memories
(:data:`palimpsest.projections.recall.indexing.NEWEST_SHARE`), so that what an agent
writes during an import is found right away. Those memories enter the HNSW graph before
the rest of the backlog, and where they sit apart from it in meaning the backlog buries
them: each memory inserted later links to its own kind, and the neighbour lists drop
their older links into the small cluster as closer ones arrive, until no path from the
graph's entry point leads there. Among 100,000 imported memories, 2,760 conversation
turns indexed ahead of them were found by 0.205 of the HNSW search's first ten against
an exact search; inserted again once the backlog had passed them, by 0.69
(docs/recall.md). So when a batch's oldest part sweeps a range of published revisions,
the memories of that range indexed already (ahead of it) get their embedding rows
deleted and inserted again: each ends up in the graph where an oldest-first drain would
have put it, once. The batch that ends the backlog (a full one with nothing due after
it, or one whose first memory waited :data:`BACKLOG_WAIT_S`) passes every memory
published after its first (those written after the whole import, which an oldest part
never reaches).

A write that changes or erases one of them raises its requested revision first, then
(erasure) deletes its embedding, in the write's transaction. The relink locks the
watermark rows first too, and keeps only those still caught up: a write in flight either
holds the row (the relink waits for it, then leaves the memory out) or waits for the
relink's commit and deletes what it inserted. The same order as the drain's own write
(:func:`palimpsest.projections.recall.indexing._write`), so neither deadlocks the other.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = ["BACKLOG_WAIT_S", "relink_passed"]

BACKLOG_WAIT_S = 5.0
"""A batch whose oldest due memory was published at least this long ago ends a backlog:
the drain indexes a memory within a second of its publication otherwise."""

_NO_END = 2**63 - 1
"""The largest ``bigint``: no published revision is past it."""

_RELINK = (
    "WITH passed AS (SELECT memory_id FROM {schema}.revisions"
    " WHERE published > %(low)s AND published <= %(high)s"
    " AND indexed >= published AND published >= requested"
    " AND memory_id <> ALL(%(batch)s) ORDER BY memory_id FOR UPDATE),"
    " gone AS (DELETE FROM {schema}.{embeddings} e USING passed"
    " WHERE e.memory_id = passed.memory_id AND e.model_id = %(model)s RETURNING e.*)"
    " INSERT INTO {schema}.{embeddings} SELECT * FROM gone"
)


def relink_passed(
    log: EventLog,
    tenant_id: UUID,
    model_id: str,
    rows: list[dict[str, Any]],
    oldest: int,
    *,
    ended: bool,
) -> int:
    """Insert again the embeddings (of ``model_id``) of the tenant's memories indexed
    ahead of a batch's oldest part; return how many.

    ``rows`` are the batch's due memories by published revision (each with its
    ``published`` revision and ``waited``, the seconds since), ``oldest`` of them its
    oldest part when the batch was full (the rest its newest), else 0; ``ended``: nothing
    is due after it. A full batch has more due behind it: the memories published after
    its first and up to the last of its oldest part that are indexed and caught up, other
    than its own, were indexed while older ones were due. A batch ends a backlog when
    nothing is due after a full one, or when its first memory waited
    :data:`BACKLOG_WAIT_S` or more: then every memory published after its first is
    passed (those written after the whole import, which no oldest part reaches).
    Otherwise (the drain keeping up) nothing is.
    """
    if not rows:
        return 0
    low = rows[0]["published"]
    if ended and (oldest or (rows[0]["waited"] or 0.0) >= BACKLOG_WAIT_S):
        high = _NO_END
    elif oldest:
        high = rows[min(oldest, len(rows)) - 1]["published"]
    else:
        return 0
    if high <= low:
        return 0
    # Durable, unlike the drain's own write: a relink lost in a crash is never redone
    # (its memories are no longer due), where a lost write leaves its rows due.
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_query(_RELINK, log.datastore.schema),
            {
                "low": low,
                "high": high,
                "batch": [row["memory_id"] for row in rows],
                "model": model_id,
            },
        )
        return cur.rowcount
