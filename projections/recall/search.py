"""Recall: the k current memories nearest a query, filtered inside the database.

When the tenant and the filters select few memories (a bounded count,
at most :data:`EXACT_BELOW`), the search is exact. Otherwise it runs on
the HNSW index (cosine) first, with the tenant and the filters in the same
query and the index asked for several times k candidates. pgvector before
0.8 (the embedded server has 0.6) stops an index scan after
``hnsw.ef_search`` candidates, so a filter can still leave fewer than k:
then the same query runs as an exact search, which the filter makes small
(btree indexes on tenant, model and the filtered columns narrow it first).
Either way the answer holds k memories when k exist.

Ranking: similarity rounded to :data:`SIMILARITY_DECIMALS` decimals, then
salience, then recency (the newest write that touched the memory), then id.
A memory whose revision or index has not caught up is returned as
``pending``, without content; an archived one only with
``include_archived``, flagged.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any
from uuid import UUID

from projections.recall.embedders import Embedder
from projections.store.eventlog import EventLog
from projections.store.migrations import EMBEDDINGS_TABLE, EVENTS_TABLE
from projections.store.tenancy import tenant_transaction
from projections.views.access_stamps import SALIENCE_COLUMNS, salience_from, stamp_accesses
from projections.views.beliefs import filter_clauses

__all__ = [
    "EF_SEARCH",
    "EXACT_BELOW",
    "HNSW_OVERFETCH",
    "RecallQuery",
    "RecallResult",
    "SIMILARITY_DECIMALS",
    "rank_key",
    "recall",
    "search",
]

SIMILARITY_DECIMALS = 3
"""Similarities equal to this many decimals are equally relevant: salience decides."""

HNSW_OVERFETCH = 4
"""Candidates asked of the index per memory wanted (archived ones are dropped after)."""

EXACT_BELOW = 2000
"""Searched exactly, without trying the index, when the tenant and filters select
at most this many memories: cheaper than an index walk the filters would leave
short (pgvector 0.6 filters after the walk)."""

EF_SEARCH = 400
"""The least ``hnsw.ef_search`` of a recall: the index is built sparse for cheap
inserts (see :func:`projections.store.migrations.vector_index_ddl`), so the search looks
wider; it costs well under a millisecond."""


@dataclass(frozen=True)
class RecallQuery:
    """What to look for, and where."""

    text: str
    k: int = 10
    memory_type: str | None = None
    scope: str | None = None
    project: str | None = None
    include_archived: bool = False


@dataclass
class RecallResult:
    """The ranked memories, and how the answer was found."""

    items: list[dict[str, Any]]
    strategy: str
    """``hnsw``, or ``exact`` when filters left the index short."""
    embed_ms: float
    search_ms: float
    timings: dict[str, float] = field(default_factory=dict)


def rank_key(similarity: float, salience: float, recency: int, memory_id: str) -> tuple[Any, ...]:
    """Return the sort key of a recalled memory (ascending sorts best first)."""
    return (-round(similarity, SIMILARITY_DECIMALS), -salience, -recency, memory_id)


def _vector(values: list[float]) -> str:
    return "[" + ",".join(map(repr, values)) + "]"


def search(
    log: EventLog,
    tenant_id: UUID,
    *,
    vector: list[float],
    model_id: str,
    dimension: int,
    where: RecallQuery,
    exact: bool,
    limit: int,
    now: datetime,
) -> list[dict[str, Any]]:
    """Return up to ``limit`` embedded memories nearest ``vector``, with their state.

    ``exact`` computes every distance among the rows the filters select;
    otherwise the HNSW index is walked (``hnsw.ef_search`` = ``limit``).
    """
    schema = log.datastore.schema
    distance = f"(e.embedding::vector({dimension}) <=> %(q)s::vector({dimension}))"
    filters, params = filter_clauses("e", where.memory_type, where.scope, where.project)
    clauses = ["e.model_id = %(model)s", f"e.dimension = {dimension}", *filters]
    params.update(q=_vector(vector), model=model_id, limit=limit, now=now)
    # An expression the index cannot serve forces the exact plan.
    order = f"{distance} + 0" if exact else distance
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        # One round trip for the settings. The tenant's btree index plus a sort is
        # an exact search, cheap on a small tenant and linear on a large one: the
        # index path must walk HNSW, so the planner is not offered the others.
        scan = "on" if exact else "off"
        cur.execute(
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('enable_bitmapscan', %s, true),"
            " set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true)",
            (str(max(EF_SEARCH, min(limit, 1000))), scan, scan, scan),
        )
        cur.execute(
            f"WITH near AS (SELECT e.memory_id, e.version_id, e.content_digest, e.revision,"
            f" e.memory_type, e.scope, e.project, 1 - {distance} AS similarity"
            f' FROM "{schema}".{EMBEDDINGS_TABLE} e WHERE {" AND ".join(clauses)}'
            f" ORDER BY {order} LIMIT %(limit)s)"
            " SELECT n.*, r.requested, r.published, b.belief, b.current_version_id,"
            f" {SALIENCE_COLUMNS}, c.content, (SELECT count(*) FROM"
            f' "{schema}".evidence_links l JOIN "{schema}".observation_deadlines o'
            " USING (tenant_id, observation_id) WHERE l.memory_id = n.memory_id"
            " AND o.expired_position IS NULL AND o.erased_position IS NULL"
            " AND o.deadline <= %(now)s) AS due"
            f' FROM near n JOIN "{schema}".revisions r ON r.memory_id = n.memory_id'
            f' LEFT JOIN "{schema}".beliefs b ON b.memory_id = n.memory_id'
            f' JOIN "{schema}".memory_index m ON m.memory_id = n.memory_id'
            f' JOIN "{schema}"."{EVENTS_TABLE}" first ON first.notification_id = m.position'
            f' LEFT JOIN "{schema}".memory_access a ON a.memory_id = n.memory_id'
            f' LEFT JOIN "{schema}".payloads c ON c.digest = n.content_digest',
            params,
        )
        return [dict(row) for row in cur.fetchall()]


def _archived(row: dict[str, Any]) -> bool:
    belief = row["belief"]
    return belief is not None and belief["labels"].get("archived") is not None


def _selected(
    log: EventLog, tenant_id: UUID, embedder: Embedder, query: RecallQuery, upto: int
) -> int:
    """Return how many embedded memories the tenant and filters select, counting no
    further than ``upto`` (a few thousand btree entries at most)."""
    filters, params = filter_clauses("e", query.memory_type, query.scope, query.project)
    clauses = ["e.model_id = %(model)s", *filters]
    params.update(model=embedder.model_id, upto=upto)
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT count(*) AS n FROM (SELECT 1 FROM "{log.datastore.schema}".'
            f"{EMBEDDINGS_TABLE} e WHERE {' AND '.join(clauses)} LIMIT %(upto)s) AS s",
            params,
        )
        row = cur.fetchone()
    return int(row["n"]) if row else 0


def recall(
    log: EventLog,
    embedder: Embedder,
    tenant_id: UUID,
    query: RecallQuery,
    *,
    now: datetime,
) -> RecallResult:
    """Return the ``k`` best memories for ``query``, ranked, each stamped with an access.

    Raises:
        EmbedderUnavailableError: the query could not be embedded.
    """
    started = time.perf_counter()
    [vector] = embedder.embed([query.text])
    embedded = time.perf_counter()
    find = partial(
        search,
        log,
        tenant_id,
        vector=vector,
        model_id=embedder.model_id,
        dimension=embedder.dimension,
        where=query,
        now=now,
    )
    limit = query.k * HNSW_OVERFETCH
    small = _selected(log, tenant_id, embedder, query, EXACT_BELOW + 1) <= EXACT_BELOW
    rows = [] if small else find(exact=False, limit=limit)
    kept = [r for r in rows if query.include_archived or not _archived(r)]
    strategy = "hnsw"
    while len(kept) < query.k:
        # Short: the filters (or archived memories) left fewer than k. Exact search
        # over what the filters select; asked for more while archived ones crowd it.
        strategy = "exact"
        rows = find(exact=True, limit=limit)
        kept = [r for r in rows if query.include_archived or not _archived(r)]
        if len(rows) < limit:
            break
        limit *= HNSW_OVERFETCH
    searched = time.perf_counter()
    items = _rank(log, tenant_id, kept, query.k, now)
    done = time.perf_counter()
    return RecallResult(
        items=items,
        strategy=strategy,
        embed_ms=(embedded - started) * 1000,
        search_ms=(done - embedded) * 1000,
        timings={"index": (searched - embedded) * 1000, "rank": (done - searched) * 1000},
    )


def _rank(
    log: EventLog, tenant_id: UUID, rows: list[dict[str, Any]], k: int, now: datetime
) -> list[dict[str, Any]]:
    """Rank by rounded similarity, salience, recency and id; shape the answers; stamp
    an access on each current one returned."""
    current = [
        r
        for r in rows
        if r["belief"] is not None
        and r["published"] >= r["requested"]
        and r["current_version_id"] == r["version_id"]
        and not r["due"]
    ]
    current_ids = {r["memory_id"] for r in current}
    saliences = {r["memory_id"]: salience_from(r["belief"], r, now) for r in current}
    ranked = sorted(
        rows,
        key=lambda r: rank_key(
            r["similarity"], saliences.get(r["memory_id"], 0.0), r["revision"], str(r["memory_id"])
        ),
    )[:k]
    items: list[dict[str, Any]] = []
    previous: tuple[Any, ...] | None = None
    for r in ranked:
        salience = saliences.get(r["memory_id"])
        key = rank_key(r["similarity"], salience or 0.0, r["revision"], str(r["memory_id"]))
        item: dict[str, Any] = {
            "id": str(r["memory_id"]),
            "type": r["memory_type"],
            "scope": r["scope"],
            "project": r["project"],
            "similarity": round(float(r["similarity"]), 6),
            "rank": {
                "similarity": round(float(r["similarity"]), SIMILARITY_DECIMALS),
                "salience": salience,
                "recency": r["revision"],
                "decided_by": _decided_by(previous, key),
            },
        }
        previous = key
        if r["memory_id"] in current_ids:
            item.update(
                status="current",
                salience=salience,
                version_id=str(r["version_id"]),
                content=bytes(r["content"]).decode("utf-8") if r["content"] else None,
                belief=r["belief"],
            )
        else:
            item.update(status="pending", revision={"requested": r["requested"]})
        items.append(item)
    stamp_accesses(log, tenant_id, [UUID(i["id"]) for i in items if i["status"] == "current"], now)
    return items


def _decided_by(previous: tuple[Any, ...] | None, key: tuple[Any, ...]) -> str:
    """Return which part of the rank key put this memory below the previous one."""
    if previous is None:
        return "first"
    for name, a, b in zip(("similarity", "salience", "recency", "id"), previous, key, strict=True):
        if a != b:
            return name
    return "id"
