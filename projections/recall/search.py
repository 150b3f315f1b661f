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
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from pgvector.sqlalchemy import Vector
from sqlalchemy import Float, Integer, cast, exists, func, null, select
from typing_extensions import TypedDict

from projections.recall.embedders import Embedder
from projections.recall.fusion import Fused, fuse, text_weight
from projections.recall.recalled import (
    DecidedBy,
    RecalledCurrent,
    RecalledPending,
    RecallMode,
    RecallRank,
    RequestedRevision,
)
from projections.recall.words import EVERY_WORD, text_candidates
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
from projections.views.decay_inputs import faded
from projections.views.listing import attribute_conditions, attribute_values
from projections.views.statement import events_table, inline, param, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import Select

    from projections.store.eventlog import EventLog

__all__ = [
    "EF_SEARCH",
    "EXACT_BELOW",
    "FADED_DEMOTION",
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

FADED_DEMOTION = 1e6
"""Subtracted from a faded memory's rank salience: more than any unpinned salience
(at most ``1 + ln(1 + accesses)``), so faded ranks below unfaded at equal similarity."""

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
    mode: RecallMode = "hybrid"
    min_similarity: float | None = None
    """Leave out memories less similar than this (in text mode, the query is then
    embedded to know)."""
    offset: int = 0
    """How many of the best to skip: the page after the first ``offset``."""


@dataclass(frozen=True)
class RecallResult:
    """The ranked memories, and how the answer was found."""

    items: list[RecalledCurrent | RecalledPending]
    strategy: Literal["hnsw", "exact", "text"]
    """``hnsw``, or ``exact`` when filters left the index short; ``text`` in text mode."""
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
    similarity: float | None
    text_score: float | None
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
    faded: bool
    """Faded by the decay cycle (:func:`projections.views.decay_inputs.faded`)."""


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
    schema: str,
    dimension: int | None,
    exact: bool,
    filtered: tuple[str, ...],
    topic: bool = False,
    words: bool = False,
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

    With ``words`` the candidates are those of the text search instead
    (:func:`projections.recall.words.text_candidates`, parameter ``words``; with
    their similarity to ``q`` unless ``dimension`` is None), in the same query.
    """
    tables = tables_in(schema)
    if words or dimension is None:
        t = tables["memory_texts"].alias("e")
        conditions = [
            *attribute_conditions(t, filtered),
            *([_of_topic(tables, t)] if topic else []),
        ]
        near = text_candidates(t, tables, conditions, dimension)
        return _with_state(schema, tables, near)
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
            cast(null(), Float).label("text_score"),
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
    return _with_state(schema, tables, near)


def _with_state(schema: str, tables: dict[str, Any], near: Any) -> Select[Any]:
    """Return the candidates of ``near`` with the state recall ranks and answers by."""
    n = near.alias("n")
    r = tables["revisions"].alias("r")
    b = tables["beliefs"].alias("b")
    m = tables["memory_index"].alias("m")
    first = events_table(schema).alias("first")
    a = tables["memory_access"].alias("a")
    c = tables["payloads"].alias("c")
    f = tables["memory_fades"].alias("f")
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
        n.c.text_score,
        r.c.requested,
        r.c.published,
        b.c.belief,
        b.c.current_version_id,
        *salience_columns(m, first, a),
        c.c.content,
        due.scalar_subquery().label("due"),
        faded(f, b, a).label("faded"),
    ).select_from(
        n.join(r, r.c.memory_id == n.c.memory_id)
        .outerjoin(b, b.c.memory_id == n.c.memory_id)
        .join(m, m.c.memory_id == n.c.memory_id)
        .join(first, first.c.notification_id == m.c.position)
        .outerjoin(a, a.c.memory_id == n.c.memory_id)
        .outerjoin(c, c.c.digest == n.c.content_digest)
        .outerjoin(f, f.c.memory_id == n.c.memory_id)
    )


def search(
    log: EventLog,
    tenant_id: UUID,
    *,
    vector: list[float] | None,
    model_id: str,
    dimension: int,
    where: RecallQuery,
    exact: bool,
    limit: int,
    now: datetime,
    words: bool = False,
) -> list[SearchRow]:
    """Return up to ``limit`` embedded memories nearest ``vector``, with their state.

    ``exact`` computes every distance among the rows the filters select;
    otherwise the HNSW index is walked (``hnsw.ef_search`` = ``limit``). With
    ``words``, the memories whose words best match ``where.text`` instead (each
    with its similarity to ``vector``, unless that is None).
    """
    assert words or vector is not None, "a vector search needs a vector"
    filters = attribute_values(where.memory_type, where.scope, where.project)
    topic = where.topic is not None
    query = shaped_sql(
        search_statement,
        log.datastore.schema,
        None if vector is None else dimension,
        exact,
        tuple(filters),
        topic,
        words,
    )
    params: dict[str, object] = {**filters, "model": model_id, "limit": limit, "now": now}
    if vector is not None:
        params["q"] = _vector(vector)
    if words:
        params["words"] = where.text
    if topic:
        params["topic"] = where.topic
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        # One round trip for the settings. The tenant's btree index plus a sort is
        # an exact search, cheap on a small tenant and linear on a large one: the
        # index path must walk HNSW, so the planner is not offered the others. The
        # text index (GIN) is read only through bitmap scans.
        scan = "on" if exact or words else "off"
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


def _kept(rows: list[SearchRow], query: RecallQuery) -> list[SearchRow]:
    return [r for r in rows if query.include_archived or not _archived(r)]


_TEXT_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-words")
"""Hybrid recall's text searches, run beside its vector searches (each on its own
pooled connection; a request waits for its own, holding no connection meanwhile)."""


def _nearest(
    find: Callable[..., list[SearchRow]],
    log: EventLog,
    tenant_id: UUID,
    embedder: Embedder,
    query: RecallQuery,
    want: int,
) -> tuple[list[SearchRow], Literal["hnsw", "exact"]]:
    """Return at least ``want`` memories nearest the query when that many exist
    (archived ones dropped unless asked for), and which search found them."""
    limit = want * HNSW_OVERFETCH
    small = _selected(log, tenant_id, embedder, query, EXACT_BELOW + 1) <= EXACT_BELOW
    rows = [] if small else find(exact=False, limit=limit)
    kept = _kept(rows, query)
    strategy: Literal["hnsw", "exact"] = "hnsw"
    while len(kept) < want:
        # Short: the filters (or archived memories) left fewer than k. Exact search
        # over what the filters select; asked for more while archived ones crowd it.
        strategy = "exact"
        rows = find(exact=True, limit=limit)
        kept = _kept(rows, query)
        if len(rows) < limit:
            break
        limit *= HNSW_OVERFETCH
    return kept, strategy


def recall(
    log: EventLog,
    embedder: Embedder,
    tenant_id: UUID,
    query: RecallQuery,
    *,
    now: datetime,
) -> RecallResult:
    """Return the ``k`` best memories for ``query`` after the first ``offset``,
    ranked, each stamped with an access.

    ``vector`` ranks by similarity, ``text`` by the text score (the query is not
    embedded unless ``min_similarity`` is given), ``hybrid`` by the two rankings
    fused (:mod:`projections.recall.fusion`). With ``min_similarity``, less similar
    memories (and memories matched by words that have no embedding yet) are left
    out.

    Raises:
        EmbedderUnavailableError: the query could not be embedded.
    """
    started = time.perf_counter()
    want = query.offset + query.k
    embed = query.mode != "text" or query.min_similarity is not None
    vector = embedder.embed([query.text])[0] if embed else None
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
    by_vector: list[SearchRow] = []
    strategy: Literal["hnsw", "exact", "text"] = "text"
    by_text: list[SearchRow] = []
    if query.mode == "hybrid":
        # The two searches read different tables on their own connections: run the
        # text search beside the vector one, so hybrid costs the slower, not the sum.
        words = _TEXT_SEARCHES.submit(find, exact=False, limit=want * HNSW_OVERFETCH, words=True)
        by_vector, strategy = _nearest(find, log, tenant_id, embedder, query, want)
        by_text = _kept(words.result(), query)
    elif query.mode == "vector":
        by_vector, strategy = _nearest(find, log, tenant_id, embedder, query, want)
    else:
        by_text = _kept(find(exact=False, limit=want * HNSW_OVERFETCH, words=True), query)
    searched = time.perf_counter()
    # The statement's join does not keep the candidates' order: each list is sorted.
    by_vector.sort(key=lambda r: (-(r["similarity"] or 0.0), str(r["memory_id"])))
    by_text.sort(key=lambda r: (-(r["text_score"] or 0.0), str(r["memory_id"])))
    places = fuse(
        [(r["memory_id"], round(r["similarity"] or 0.0, SIMILARITY_DECIMALS)) for r in by_vector],
        [(r["memory_id"], round(r["text_score"] or 0.0, SIMILARITY_DECIMALS)) for r in by_text],
        complete={r["memory_id"] for r in by_text if (r["text_score"] or 0.0) >= EVERY_WORD},
        text_weight=text_weight(query.text),
    )
    scores = {r["memory_id"]: r["text_score"] for r in by_text}
    rows = {r["memory_id"]: r for r in by_text} | {
        r["memory_id"]: SearchRow(**{**r, "text_score": scores.get(r["memory_id"])})
        for r in by_vector
    }
    floor = query.min_similarity
    candidates = [
        r
        for r in rows.values()
        if floor is None or (r["similarity"] is not None and r["similarity"] >= floor)
    ]
    items = _rank(log, tenant_id, candidates, query, now, places)
    done = time.perf_counter()
    return RecallResult(
        items=items,
        strategy=strategy,
        embed_ms=(embedded - started) * 1000,
        search_ms=(done - embedded) * 1000,
        timings={"index": (searched - embedded) * 1000, "rank": (done - searched) * 1000},
    )


def _relevance(row: SearchRow, mode: RecallMode, places: dict[UUID, Fused]) -> float:
    """The score a memory ranks by first: similarity, text score or fused score."""
    if mode == "vector":
        return float(row["similarity"] or 0.0)
    if mode == "text":
        return float(row["text_score"] or 0.0)
    return places[row["memory_id"]].score


def _rounded(value: float | None, decimals: int) -> float | None:
    return None if value is None else round(float(value), decimals)


def _rank(
    log: EventLog,
    tenant_id: UUID,
    rows: list[SearchRow],
    query: RecallQuery,
    now: datetime,
    places: dict[UUID, Fused],
) -> list[RecalledCurrent | RecalledPending]:
    """Rank by rounded relevance, salience, recency and id; shape the ``k`` answers
    after the first ``offset``; stamp an access on each current one returned."""
    current: dict[UUID, BeliefDocument] = {
        r["memory_id"]: r["belief"]
        for r in rows
        if r["belief"] is not None
        and r["published"] >= r["requested"]
        and r["current_version_id"] == r["version_id"]
        and not r["due"]
    }
    # A faded memory (the decay cycle's demotion) ranks below every unfaded one of
    # equal similarity: its salience is pushed below any unpinned salience.
    saliences = {
        r["memory_id"]: salience_from(current[r["memory_id"]], r, now)
        - (FADED_DEMOTION if r["faded"] else 0.0)
        for r in rows
        if r["memory_id"] in current
    }
    scores = {
        r["memory_id"]: score_from(current[r["memory_id"]], r, now)
        for r in rows
        if r["memory_id"] in current
    }
    relevance = {r["memory_id"]: _relevance(r, query.mode, places) for r in rows}

    def key_of(r: SearchRow) -> tuple[Any, ...]:
        memory_id = r["memory_id"]
        return rank_key(
            relevance[memory_id], saliences.get(memory_id, 0.0), r["revision"], str(memory_id)
        )

    ordered = sorted(rows, key=key_of)[: query.offset + query.k]
    items: list[RecalledCurrent | RecalledPending] = []
    previous = key_of(ordered[query.offset - 1]) if 0 < query.offset <= len(ordered) else None
    first: DecidedBy = "similarity" if query.mode == "vector" else "relevance"
    for r in ordered[query.offset :]:
        belief = current.get(r["memory_id"])
        salience = scores.get(r["memory_id"])
        key = key_of(r)
        place = places.get(r["memory_id"])
        rank = RecallRank(
            mode=query.mode,
            relevance=round(relevance[r["memory_id"]], SIMILARITY_DECIMALS),
            similarity=_rounded(r["similarity"], SIMILARITY_DECIMALS),
            vector_rank=place.vector_rank if place else None,
            text_rank=place.text_rank if place else None,
            text_score=_rounded(r["text_score"], 4),
            salience=salience,
            pinned=belief is not None and bool(belief["labels"]["pinned"]),
            recency=r["revision"],
            decided_by=_decided_by(previous, key, first),
        )
        previous = key
        attributes = {
            "id": r["memory_id"],
            "memory_type": r["memory_type"],
            "scope": r["scope"],
            "project": r["project"],
            "topic": r["topic"],
            "similarity": _rounded(r["similarity"], 6),
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
                    faded=bool(r["faded"]),
                )
            )
        else:
            items.append(
                RecalledPending(**attributes, revision=RequestedRevision(requested=r["requested"]))
            )
    stamp_accesses(log, tenant_id, [i.id for i in items if isinstance(i, RecalledCurrent)], now)
    return items


_KEY_PARTS: tuple[DecidedBy, ...] = ("salience", "recency", "id")
"""The parts of :func:`rank_key` after relevance, in order."""


def _decided_by(
    previous: tuple[Any, ...] | None, key: tuple[Any, ...], first: DecidedBy
) -> DecidedBy:
    """Return which part of the rank key put this memory below the previous one
    (``first`` names relevance: ``similarity`` in vector mode)."""
    if previous is None:
        return "first"
    for name, a, b in zip((first, *_KEY_PARTS), previous, key, strict=True):
        if a != b:
            return name
    return "id"
