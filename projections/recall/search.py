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
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from pgvector.sqlalchemy import Vector
from sqlalchemy import Integer, cast, exists, func, select
from typing_extensions import TypedDict

from projections.recall.embedders import Embedder
from projections.recall.recalled import (
    DecidedBy,
    RecalledCurrent,
    RecalledPending,
    RecallRank,
    RequestedRevision,
)
from projections.store.sql import tables_in
from projections.store.tenancy import tenant_transaction
from projections.views.access_stamps import (
    salience_columns,
    salience_from,
    score_from,
    stamp_accesses,
)
from projections.views.belief_facts import BeliefDocument
from projections.views.current_beliefs import due_deadlines
from projections.views.listing import attribute_conditions, attribute_values
from projections.views.statement import events_table, inline, param, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import Select

    from projections.store.eventlog import EventLog

__all__ = [
    "EF_SEARCH",
    "EXACT_BELOW",
    "HNSW_OVERFETCH",
    "RecallQuery",
    "RecallResult",
    "SIMILARITY_DECIMALS",
    "SearchRow",
    "rank_key",
    "recall",
    "search",
    "search_statement",
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
    topic: str | None = None


@dataclass(frozen=True)
class RecallResult:
    """The ranked memories, and how the answer was found."""

    items: list[RecalledCurrent | RecalledPending]
    strategy: Literal["hnsw", "exact"]
    """``hnsw``, or ``exact`` when filters left the index short."""
    embed_ms: float
    search_ms: float
    timings: dict[str, float] = field(default_factory=dict)


class SearchRow(TypedDict):
    """An embedded memory near the query, with its state (a row of :func:`search`)."""

    memory_id: UUID
    version_id: UUID
    content_digest: str
    revision: int
    scope: str
    project: str | None
    topic: str | None
    similarity: float
    requested: int
    published: int
    belief: BeliefDocument | None
    current_version_id: UUID | None
    memory_type: str
    recorded_at: datetime
    accesses: int | None
    last_access: datetime | None
    content: bytes | None
    due: int


def rank_key(similarity: float, salience: float, recency: int, memory_id: str) -> tuple[Any, ...]:
    """Return the sort key of a recalled memory (ascending sorts best first)."""
    return (-round(similarity, SIMILARITY_DECIMALS), -salience, -recency, memory_id)


def _vector(values: list[float]) -> str:
    return "[" + ",".join(map(repr, values)) + "]"


def _of_topic(tables: dict[str, Any], e: Any) -> Any:
    """The condition that embedding ``e``'s memory has ``%(topic)s``: the topic is a
    memory attribute the embeddings do not copy, so it is looked up by primary key."""
    m = tables["memory_index"].alias("t")
    return exists(
        select(inline(1)).where(
            m.c.memory_id == e.c.memory_id, m.c.topic == param("topic", m.c.topic.type)
        )
    )


def search_statement(
    schema: str, dimension: int, exact: bool, filtered: tuple[str, ...], topic: bool = False
) -> Select[Any]:
    """Return the query of :func:`search` (SQLAlchemy Core), for vectors of
    ``dimension`` and the filters on the columns ``filtered`` (and on ``%(topic)s``
    when ``topic``).

    The nearest embeddings come first, in a CTE, ordered by cosine distance on
    ``embedding::vector(dimension)`` with ``dimension = N`` in the text: the
    expression and the predicate of the dimension's partial HNSW index, which
    serves the order unless ``exact`` adds ``+ 0`` (an expression no index
    serves). The tenant and the filters are in the same query. Parameters:
    ``q`` (the query vector, as text), ``model``, each filter by its column,
    ``limit`` and ``now``.
    """
    tables = tables_in(schema)
    e = tables["memory_embeddings"].alias("e")
    vector_type = Vector(dimension)
    query = cast(param("q", vector_type), vector_type)
    distance = cast(e.c.embedding, vector_type).cosine_distance(query)
    near = (
        select(
            e.c.memory_id,
            e.c.version_id,
            e.c.content_digest,
            e.c.revision,
            e.c.memory_type,
            e.c.scope,
            e.c.project,
            (inline(1) - distance).label("similarity"),
        )
        .where(
            e.c.model_id == param("model", e.c.model_id.type),
            e.c.dimension == inline(dimension),
            *attribute_conditions(e, filtered),
            *([_of_topic(tables, e)] if topic else []),
        )
        # An expression the index cannot serve forces the exact plan.
        .order_by(distance + inline(0) if exact else distance)
        .limit(param("limit", Integer))
        .cte("near")
    )
    n = near.alias("n")
    r = tables["revisions"].alias("r")
    b = tables["beliefs"].alias("b")
    m = tables["memory_index"].alias("m")
    first = events_table(schema).alias("first")
    a = tables["memory_access"].alias("a")
    c = tables["payloads"].alias("c")
    due = due_deadlines(tables, n.c.memory_id).with_only_columns(func.count())
    return select(
        n.c.memory_id,
        n.c.version_id,
        n.c.content_digest,
        n.c.revision,
        n.c.scope,
        n.c.project,
        m.c.topic,
        n.c.similarity,
        r.c.requested,
        r.c.published,
        b.c.belief,
        b.c.current_version_id,
        *salience_columns(m, first, a),
        c.c.content,
        due.scalar_subquery().label("due"),
    ).select_from(
        n.join(r, r.c.memory_id == n.c.memory_id)
        .outerjoin(b, b.c.memory_id == n.c.memory_id)
        .join(m, m.c.memory_id == n.c.memory_id)
        .join(first, first.c.notification_id == m.c.position)
        .outerjoin(a, a.c.memory_id == n.c.memory_id)
        .outerjoin(c, c.c.digest == n.c.content_digest)
    )


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
) -> list[SearchRow]:
    """Return up to ``limit`` embedded memories nearest ``vector``, with their state.

    ``exact`` computes every distance among the rows the filters select;
    otherwise the HNSW index is walked (``hnsw.ef_search`` = ``limit``).
    """
    filters = attribute_values(where.memory_type, where.scope, where.project)
    topic = where.topic is not None
    query = shaped_sql(
        search_statement, log.datastore.schema, dimension, exact, tuple(filters), topic
    )
    params = {**filters, "q": _vector(vector), "model": model_id, "limit": limit, "now": now}
    if topic:
        params["topic"] = where.topic
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
        cur.execute(query, params)
        rows: list[SearchRow] = cur.fetchall()
        return rows


def _archived(row: SearchRow) -> bool:
    belief = row["belief"]
    return belief is not None and belief["labels"].get("archived") is not None


def _selected_count(schema: str, filtered: tuple[str, ...], topic: bool) -> Select[Any]:
    """How many embeddings of ``%(model)s`` the filters select, up to ``%(upto)s``."""
    tables = tables_in(schema)
    e = tables["memory_embeddings"].alias("e")
    selected = (
        select(inline(1))
        .where(
            e.c.model_id == param("model", e.c.model_id.type),
            *attribute_conditions(e, filtered),
            *([_of_topic(tables, e)] if topic else []),
        )
        .limit(param("upto", Integer))
        .subquery("s")
    )
    return select(func.count().label("n")).select_from(selected)


def _selected(
    log: EventLog, tenant_id: UUID, embedder: Embedder, query: RecallQuery, upto: int
) -> int:
    """Return how many embedded memories the tenant and filters select, counting no
    further than ``upto`` (a few thousand btree entries at most)."""
    filters: dict[str, object] = {**attribute_values(query.memory_type, query.scope, query.project)}
    topic = query.topic is not None
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            shaped_sql(_selected_count, log.datastore.schema, tuple(filters), topic),
            {
                **filters,
                **({"topic": query.topic} if topic else {}),
                "model": embedder.model_id,
                "upto": upto,
            },
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
    strategy: Literal["hnsw", "exact"] = "hnsw"
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
    log: EventLog, tenant_id: UUID, rows: list[SearchRow], k: int, now: datetime
) -> list[RecalledCurrent | RecalledPending]:
    """Rank by rounded similarity, salience, recency and id; shape the answers; stamp
    an access on each current one returned."""
    current: dict[UUID, BeliefDocument] = {
        r["memory_id"]: r["belief"]
        for r in rows
        if r["belief"] is not None
        and r["published"] >= r["requested"]
        and r["current_version_id"] == r["version_id"]
        and not r["due"]
    }
    saliences = {
        r["memory_id"]: salience_from(current[r["memory_id"]], r, now)
        for r in rows
        if r["memory_id"] in current
    }
    scores = {
        r["memory_id"]: score_from(current[r["memory_id"]], r, now)
        for r in rows
        if r["memory_id"] in current
    }
    ranked = sorted(
        rows,
        key=lambda r: rank_key(
            r["similarity"], saliences.get(r["memory_id"], 0.0), r["revision"], str(r["memory_id"])
        ),
    )[:k]
    items: list[RecalledCurrent | RecalledPending] = []
    previous: tuple[Any, ...] | None = None
    for r in ranked:
        belief = current.get(r["memory_id"])
        salience = scores.get(r["memory_id"])
        key = rank_key(
            r["similarity"], saliences.get(r["memory_id"], 0.0), r["revision"], str(r["memory_id"])
        )
        rank = RecallRank(
            similarity=round(float(r["similarity"]), SIMILARITY_DECIMALS),
            salience=salience,
            pinned=belief is not None and bool(belief["labels"]["pinned"]),
            recency=r["revision"],
            decided_by=_decided_by(previous, key),
        )
        previous = key
        attributes = {
            "id": r["memory_id"],
            "memory_type": r["memory_type"],
            "scope": r["scope"],
            "project": r["project"],
            "topic": r["topic"],
            "similarity": round(float(r["similarity"]), 6),
            "rank": rank,
        }
        if belief is not None:
            content = r["content"]
            items.append(
                RecalledCurrent(
                    **attributes,
                    salience=salience,
                    version_id=r["version_id"],
                    content=bytes(content).decode("utf-8") if content else None,
                    belief=belief,
                )
            )
        else:
            items.append(
                RecalledPending(**attributes, revision=RequestedRevision(requested=r["requested"]))
            )
    stamp_accesses(log, tenant_id, [i.id for i in items if isinstance(i, RecalledCurrent)], now)
    return items


_KEY_PARTS: tuple[DecidedBy, ...] = ("similarity", "salience", "recency", "id")
"""The parts of :func:`rank_key`, in order."""


def _decided_by(previous: tuple[Any, ...] | None, key: tuple[Any, ...]) -> DecidedBy:
    """Return which part of the rank key put this memory below the previous one."""
    if previous is None:
        return "first"
    for name, a, b in zip(_KEY_PARTS, previous, key, strict=True):
        if a != b:
            return name
    return "id"
