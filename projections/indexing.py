"""The indexing drain: embed each memory's current version for recall.

Work is found in the database: memories whose published belief names a
current version that has no embedding with the active model yet. A pass
reads a bounded batch and the versions' content, embeds them outside any
transaction (a model call can take seconds; the library's
idle-in-transaction timeout would kill a transaction held that long), then
writes the vectors in one short transaction, and only for memories whose
requested revision is still the one it read: a write in between (a new
version, an erasure) makes the vector stale, and the next pass redoes it.
Rows of another model are deleted once a tenant is fully indexed with the
active one, so a model change re-embeds in the background while recall
keeps answering from what is indexed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.domain import CanMutateAggregate
from eventsourcing.persistence import StoredEvent

from domain.memory import Memory
from projections._tenancy import known_tenants, tenant_transaction
from projections.embedders import Embedder
from projections.eventlog import EventLog
from projections.migrations import EMBEDDINGS_TABLE, EVENTS_TABLE

__all__ = [
    "IndexReport",
    "index_pending",
    "reindex",
    "unindexed_count",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IndexReport:
    """What one indexing pass did."""

    embedded: int
    stale: int
    """Vectors computed but not written: the memory changed meanwhile."""


def _pending_sql(schema: str) -> str:
    return (
        "SELECT b.memory_id, b.current_version_id, r.requested,"
        " m.memory_type, m.scope, m.project"
        f' FROM "{schema}".beliefs b'
        f' JOIN "{schema}".revisions r USING (tenant_id, memory_id)'
        f' JOIN "{schema}".memory_index m USING (tenant_id, memory_id)'
        f' LEFT JOIN "{schema}".{EMBEDDINGS_TABLE} e ON e.tenant_id = b.tenant_id'
        " AND e.memory_id = b.memory_id AND e.model_id = %(model)s"
        " WHERE b.current_version_id IS NOT NULL AND r.published >= r.requested"
        " AND m.erased_position IS NULL"
        " AND (e.version_id IS NULL OR e.version_id <> b.current_version_id)"
    )


def unindexed_count(log: EventLog, tenant_id: UUID, model_id: str) -> int:
    """Return how many of the tenant's published memories lack a current embedding."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f"SELECT count(*) AS n FROM ({_pending_sql(log.datastore.schema)}) p",
            {"model": model_id},
        )
        row = cur.fetchone()
    return int(row["n"]) if row else 0


def _versions(log: EventLog, tenant_id: UUID, rows: list[dict[str, Any]]) -> dict[UUID, str]:
    """Return the content of each row's current version, by memory id (bytes that are
    gone, such as erased ones, are left out)."""
    schema = log.datastore.schema
    ids = [row["memory_id"] for row in rows]
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            "SELECT originator_id, originator_version, topic, state"
            f' FROM "{schema}"."{EVENTS_TABLE}" WHERE originator_id = ANY(%s)'
            " ORDER BY originator_id, originator_version",
            (ids,),
        )
        memories: dict[UUID, Any] = {}
        for r in cur:
            event = log.mapper.to_domain_event(
                StoredEvent(r["originator_id"], r["originator_version"], r["topic"], r["state"])
            )
            assert isinstance(event, CanMutateAggregate)
            key = UUID(str(r["originator_id"]))
            memories[key] = event.mutate(memories.get(key))
        digests: dict[UUID, str] = {}
        for row in rows:
            memory = memories.get(row["memory_id"])
            if not isinstance(memory, Memory):
                continue
            for version in memory.versions:
                if version.version_id == row["current_version_id"] and version.erased_by is None:
                    digests[row["memory_id"]] = version.content_digest
        cur.execute(
            f'SELECT digest, content FROM "{schema}".payloads WHERE digest = ANY(%s)',
            (sorted(set(digests.values())),),
        )
        contents = {r["digest"]: bytes(r["content"]).decode("utf-8") for r in cur}
    for row in rows:
        row["content_digest"] = digests.get(row["memory_id"])
    return {m: contents[d] for m, d in digests.items() if d in contents}


def _write(
    log: EventLog,
    tenant_id: UUID,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    vectors: list[list[float]],
) -> int:
    """Upsert the vectors of memories still at the revision read; return how many."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        # Lock the watermark rows: a write touching these memories (which raises
        # their requested revision) waits for this transaction, or has committed
        # already and is seen here.
        cur.execute(
            f'SELECT memory_id, requested FROM "{schema}".revisions'
            " WHERE memory_id = ANY(%s) FOR SHARE",
            ([row["memory_id"] for row in rows],),
        )
        still = {r["memory_id"]: r["requested"] for r in cur}
        fresh = [
            (row, vector)
            for row, vector in zip(rows, vectors, strict=True)
            if still.get(row["memory_id"]) == row["requested"]
        ]
        if not fresh:
            return 0
        cur.execute(
            f'INSERT INTO "{schema}".{EMBEDDINGS_TABLE} (memory_id, model_id, dimension,'
            " version_id, content_digest, revision, memory_type, scope, project, embedding)"
            " SELECT m, %s, %s, v, d, r, t, s, p, e::vector FROM unnest(%s::uuid[], %s::uuid[],"
            " %s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[])"
            " AS u(m, v, d, r, t, s, p, e)"
            " ON CONFLICT (tenant_id, memory_id, model_id) DO UPDATE SET"
            " dimension = excluded.dimension, version_id = excluded.version_id,"
            " content_digest = excluded.content_digest, revision = excluded.revision,"
            " memory_type = excluded.memory_type, scope = excluded.scope,"
            " project = excluded.project, embedding = excluded.embedding,"
            " embedded_at = clock_timestamp()",
            (
                embedder.model_id,
                embedder.dimension,
                [row["memory_id"] for row, _ in fresh],
                [row["current_version_id"] for row, _ in fresh],
                [row["content_digest"] for row, _ in fresh],
                [row["requested"] for row, _ in fresh],
                [row["memory_type"] for row, _ in fresh],
                [row["scope"] for row, _ in fresh],
                [row["project"] for row, _ in fresh],
                ["[" + ",".join(map(repr, vector)) + "]" for _, vector in fresh],
            ),
        )
        return len(fresh)


def _drop_other_models(log: EventLog, tenant_id: UUID, model_id: str) -> None:
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            f'DELETE FROM "{log.datastore.schema}".{EMBEDDINGS_TABLE} WHERE model_id <> %s',
            (model_id,),
        )


def index_pending(
    log: EventLog,
    embedder: Embedder,
    *,
    limit: int = 64,
    tenants: Callable[[], list[UUID]] | None = None,
) -> IndexReport:
    """Embed up to ``limit`` unindexed memories of each tenant; return what was done."""
    embedded = stale = 0
    schema = log.datastore.schema
    for tenant_id in (tenants or (lambda: known_tenants(log.datastore)))():
        with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
            cur.execute(
                _pending_sql(schema) + " ORDER BY r.requested LIMIT %(limit)s",
                {"model": embedder.model_id, "limit": limit},
            )
            rows = [dict(row) for row in cur.fetchall()]
        if not rows:
            _drop_other_models(log, tenant_id, embedder.model_id)
            continue
        contents = _versions(log, tenant_id, rows)
        rows = [row for row in rows if row["memory_id"] in contents]
        if not rows:
            continue
        vectors = embedder.embed([contents[row["memory_id"]] for row in rows])
        written = _write(log, tenant_id, embedder, rows, vectors)
        embedded += written
        stale += len(rows) - written
    if embedded or stale:
        _log.info("indexed", extra={"embedded": embedded, "stale": stale})
    return IndexReport(embedded, stale)


def reindex(
    log: EventLog,
    embedder: Embedder,
    *,
    limit: int = 256,
    report: Callable[[str], None] = lambda _: None,
) -> int:
    """Embed every published memory lacking a current embedding with ``embedder``'s
    model, in passes, reporting progress; return how many were embedded.

    Rows of other models are dropped per tenant once it is fully indexed, so
    recall answers from the old rows of a tenant until its new ones are done.
    """
    tenants = known_tenants(log.datastore)
    left = sum(unindexed_count(log, t, embedder.model_id) for t in tenants)
    report(f"reindex: {left:,} memories to embed with {embedder.model_id}")
    started = time.monotonic()
    total = 0
    while (done := index_pending(log, embedder, limit=limit, tenants=lambda: tenants)).embedded:
        total += done.embedded
        rate = total / max(time.monotonic() - started, 1e-9)
        report(f"reindex: {total:,}/{left:,} embedded, {rate:,.0f}/s")
    report(f"reindex: done, {total:,} embedded in {time.monotonic() - started:.1f} s")
    return total
