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
salience, then recency (the newest write that touched the memory), then id;
then a memory possibly superseded by a newer one found with it moves right
below it (:mod:`palimpsest.projections.recall._conflict_marks`). What matches
neither by meaning nor by words is left out unless ``min_similarity`` says
otherwise (:mod:`palimpsest.projections.recall._relevance`). A memory whose
revision or index has not caught up is returned as ``pending``, without
content; an archived one only with ``include_archived``, flagged.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from psycopg.rows import dict_row
from typing_extensions import TypedDict

from palimpsest.projections.recall._conflict_marks import conflicts_first, superseding
from palimpsest.projections.recall._filters import filters_of
from palimpsest.projections.recall._fusion import Fused, dated, fuse
from palimpsest.projections.recall._large_selections import LargeSelections
from palimpsest.projections.recall._named_months import named_months
from palimpsest.projections.recall._relevance import (
    BACKGROUND_RANK,
    Nearest,
    matches,
    relevance,
    text_match,
)
from palimpsest.projections.recall._statements import (
    search_statement,
    selected_count,
    similarity_statement,
    state_statement,
    vector_literal,
)
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.query_vectors import query_vectors
from palimpsest.projections.recall.recalled import (
    DecidedBy,
    RecalledCurrent,
    RecalledPending,
    RecallMode,
    RecallRank,
    RequestedRevision,
)
from palimpsest.projections.store.tenancy import run_unread, tenant_transaction
from palimpsest.projections.views.access_buffer import merged_accesses
from palimpsest.projections.views.access_stamps import (
    salience_from,
    score_from,
    stamp_accesses,
)
from palimpsest.projections.views.belief_facts import BeliefDocument
from palimpsest.projections.views.statement import shaped_sql

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "EF_SEARCH",
    "EXACT_BELOW",
    "FADED_DEMOTION",
    "HNSW_OVERFETCH",
    "RecallQuery",
    "RecallResult",
    "SIMILARITY_DECIMALS",
    "SearchRow",
    "TEXT_OVERFETCH",
    "rank_key",
    "recall",
    "search",
]

SIMILARITY_DECIMALS = 3
"""Similarities equal to this many decimals are equally relevant: salience decides."""

FADED_DEMOTION = 1e6
"""Subtracted from a faded memory's rank salience: more than any unpinned salience
(at most ``1 + ln(1 + accesses)``), so faded ranks below unfaded at equal similarity."""

HNSW_OVERFETCH = 4
"""Candidates asked of the index per memory wanted (archived ones are dropped after)."""

TEXT_OVERFETCH = 2
"""Text candidates asked per memory wanted in hybrid mode (text mode asks
:data:`HNSW_OVERFETCH`). Fusion gives a text rank past twice k little weight
(``weight / (RRF_K + rank)``), so it seldom reaches the top k: asking 2k instead
of 4k left recall@5/@10 of every label unchanged, on the knowledge-updates
questions alone and among 100,000 memories, and spares the text search the state
of 2k more candidates (docs/recall.md)."""

NAMING_WEIGHT = 0.75
"""A memory holding every word of the query keeps its place above a newer one that may
supersede it when the newer one holds less than this share of the query's word weight
(BM25's, :mod:`palimpsest.projections.recall._words`): the words it lacks name the
older one."""

EXACT_BELOW = 2000
"""Searched exactly, without trying the index, when the tenant and filters select
at most this many memories: cheaper than an index walk the filters would leave
short (pgvector 0.6 filters after the walk)."""

EF_SEARCH = 400
"""The least ``hnsw.ef_search`` of a recall: the index is built sparse for cheap
inserts (see :func:`palimpsest.projections.store.migrations.vector_index_ddl`), so the search looks
wider: recall@10 0.980 at 100,000 memories against 0.969 at 200, for about 3 ms more
per search (docs/benchmarks.md, 2026-12-03)."""


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
    embedded to know); 0 leaves nothing out. None: the default floor, which leaves out
    what matches neither by meaning nor by words
    (:func:`palimpsest.projections.recall._relevance.matches`)."""
    offset: int = 0
    """How many of the best to skip: the page after the first ``offset``."""
    possible_supersessions: bool = True
    """Mark a memory possibly superseded by a newer one and rank it below
    (:mod:`palimpsest.projections.recall._conflict_marks`); False: neither (what recall
    did before)."""
    project_under: str | None = None
    """Only this project and the projects below it (``a``: ``a`` and ``a/b``), as a
    LangGraph namespace prefix asks (:mod:`palimpsest.projections.recall._filters`)."""


@dataclass(frozen=True)
class RecallResult:
    """The ranked memories, and how the answer was found."""

    items: list[RecalledCurrent | RecalledPending]
    strategy: Literal["hnsw", "exact", "text"]
    """``hnsw``, or ``exact`` when filters left the index short; ``text`` in text mode."""
    embed_ms: float
    search_ms: float
    timings: dict[str, float] = field(default_factory=dict)
    """The parts of ``search_ms``, in milliseconds: ``index`` (the searches, each with
    its candidates' state) and ``rank`` (fusion, the default floor, the possible
    supersessions, the answers' shape and their access stamps)."""


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
    word_share: float | None
    """The share of the query's words it holds (None: not found by words)."""
    word_weight: float | None
    """The share of the query's word weight it holds (None: not found by words)."""
    phrased: bool | None
    """Whether it holds one of the query's phrases (hybrid recall's words only; None:
    not found by them, :func:`palimpsest.projections.recall._words.query_phrases`)."""
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
    """Faded by the decay cycle (:func:`palimpsest.projections.views.decay_inputs.faded`)."""
    memory_time: datetime | None
    """The memory's time (:mod:`palimpsest.domain.memory_time`), None until indexed."""
    newer: list[UUID]
    """The newer memories among recall's candidates that may supersede it, unsettled
    (:func:`palimpsest.projections.recall._conflict_marks.superseding`): filled by
    :func:`recall` once both searches' candidates are known; :func:`search` leaves it
    empty."""


def rank_key(similarity: float, salience: float, recency: int, memory_id: str) -> tuple[Any, ...]:
    """Return the sort key of a recalled memory (ascending sorts best first)."""
    return (-round(similarity, SIMILARITY_DECIMALS), -salience, -recency, memory_id)


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
    with its similarity to ``vector``, unless that is None). One transaction.
    """
    search = _Search(log.datastore.schema, vector, model_id, dimension, where, limit)
    return _searched(log, tenant_id, search, now, exact=exact, words=words)


def _searched(
    log: EventLog, tenant_id: UUID, search: _Search, now: datetime, *, exact: bool, words: bool
) -> list[SearchRow]:
    """Return one search's memories with their state, in one transaction (pipelined:
    ``BEGIN``, the tenant and the search's settings go out with the search itself)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False, pipelined=True) as cur:
        found = search.candidates(cur, exact=exact, words=words)
        return _joined(found, search.state(cur, found, now)[0])


@dataclass(frozen=True)
class _Search:
    """One recall's searches: their candidates, and the candidates' state, each read
    on a cursor of the caller's tenant transaction."""

    schema: str
    vector: list[float] | None
    model_id: str
    dimension: int
    where: RecallQuery
    limit: int

    def selects_few(self, cur: Cursor[Any], tenant_id: UUID) -> bool:
        """Whether ``tenant_id`` and the filters select at most :data:`EXACT_BELOW`
        embedded memories (counting no further: a few thousand btree entries at most),
        so that the vector search is exact from the start. A selection counted large
        in the last few seconds is not counted again
        (:mod:`palimpsest.projections.recall._large_selections`)."""
        where = self.where
        key = (
            tenant_id,
            self.model_id,
            where.memory_type,
            where.scope,
            where.project,
            where.topic,
            where.project_under,
        )
        if _LARGE_SELECTIONS.large(key):
            return False
        filters = filters_of(where)
        cur.execute(
            shaped_sql(selected_count, self.schema, *filters.shape),
            {**filters.params, "model": self.model_id, "upto": EXACT_BELOW + 1},
        )
        row = cur.fetchone()
        few = (int(row["n"]) if row else 0) <= EXACT_BELOW
        _LARGE_SELECTIONS.counted(key, large=not few)
        return few

    def candidates(self, cur: Cursor[Any], *, exact: bool, words: bool) -> list[dict[str, Any]]:
        """Return the search's candidates (:func:`search_statement`'s rows)."""
        assert words or self.vector is not None, "a vector search needs a vector"
        where = self.where
        filters = filters_of(where)
        filtered, topic, under = filters.shape
        query = shaped_sql(
            search_statement,
            self.schema,
            None if self.vector is None else self.dimension,
            exact,
            filtered,
            topic,
            words,
            under,
            words and where.mode == "hybrid",
        )
        params = {**filters.params, "model": self.model_id, "limit": self.limit}
        if self.vector is not None:
            params["q"] = vector_literal(self.vector)
        if words:
            params["words"] = where.text
        # One round trip for the settings. The tenant's btree index plus a sort is
        # an exact search, cheap on a small tenant and linear on a large one: the
        # index path must walk HNSW, so the planner is not offered the others. The
        # text index (GIN) is read only through bitmap scans. This statement is
        # prepared (parsed once per connection). A vector search is planned for each
        # query (its best plan depends on the vector: a generic one walked no index).
        # A text search has one shape whatever its words, and planning it cost 1 to
        # 3 ms of its 11 at 100,000 memories, so it keeps its generic plan, which
        # PostgreSQL replans when the tables' statistics change (as :meth:`state`
        # does). Joins are planned in the order written: weighing the others cost
        # more planning time than the reads.
        scan = "on" if exact or words else "off"
        run_unread(
            cur,
            "SELECT set_config('hnsw.ef_search', %s, true),"
            " set_config('enable_bitmapscan', %s, true),"
            " set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true),"
            " set_config('plan_cache_mode', %s, true),"
            " set_config('join_collapse_limit', '1', true)",
            (
                str(max(EF_SEARCH, min(self.limit, 1000))),
                scan,
                scan,
                scan,
                "force_generic_plan" if words else "force_custom_plan",
            ),
        )
        cur.execute(query, params, prepare=True)
        return cur.fetchall()

    def state(
        self,
        cur: Cursor[Any],
        found: list[dict[str, Any]],
        now: datetime,
        *,
        similar: list[UUID] | None = None,
    ) -> tuple[dict[tuple[UUID, str], dict[str, Any]], dict[UUID, float]]:
        """Return the state of the candidates ``found`` (:func:`state_statement`), by
        memory and content digest (``newer`` empty: :func:`recall` reads the pairs once
        it holds every search's candidates; a candidate not yet projected has none),
        and the similarity to the query of each of the memories ``similar`` that has an
        embedding (:func:`similarity_statement`), in one round trip."""
        similarities: dict[UUID, float] = {}
        if not found and not similar:
            return {}, similarities
        with cur.connection.pipeline():
            # The same plan suits any candidates (each row found by primary key).
            run_unread(cur, "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
            measured = None
            if similar:
                assert self.vector is not None, "similarities need the query's vector"
                measured = cur.connection.cursor(row_factory=dict_row)
                measured.execute(
                    shaped_sql(similarity_statement, self.schema, self.dimension),
                    {"ids": similar, "model": self.model_id, "q": vector_literal(self.vector)},
                    prepare=True,
                )
            state: dict[tuple[UUID, str], dict[str, Any]] = {}
            if found:
                cur.execute(
                    shaped_sql(state_statement, self.schema),
                    {
                        "ids": [row["memory_id"] for row in found],
                        "digests": [row["content_digest"] for row in found],
                        "now": now,
                    },
                    prepare=True,
                )
                state = {(r["memory_id"], r["content_digest"]): r for r in cur.fetchall()}
            if measured is not None:
                similarities = {r["memory_id"]: r["similarity"] for r in measured.fetchall()}
                measured.close()
        for row in state.values():
            row["newer"] = []
            _with_unwritten_accesses(row)
        return state, similarities


def _with_unwritten_accesses(row: dict[str, Any]) -> None:
    """Count in ``row`` the access stamps this process holds but has not written yet
    (:mod:`palimpsest.projections.views.access_buffer`): its salience reads them, and an
    access after its fade lifts the fade label. Merged here rather than flushed before
    the search, which cost a recall a write transaction whenever stamps waited."""
    accesses, last = merged_accesses(row["memory_id"], row["accesses"], row["last_access"])
    faded_at = row.pop("faded_at")
    row["accesses"], row["last_access"] = accesses, last
    if row["faded"] and last is not None and faded_at is not None and last > faded_at:
        row["faded"] = False


def _joined(
    found: list[dict[str, Any]], state: dict[tuple[UUID, str], dict[str, Any]]
) -> list[SearchRow]:
    """Return the candidates ``found`` that have a ``state``, each with it."""
    return [
        SearchRow(**{**row, **state[key]})  # type: ignore[typeddict-item]
        for row in found
        if (key := (row["memory_id"], row["content_digest"])) in state
    ]


def _archived(row: SearchRow) -> bool:
    belief = row["belief"]
    return belief is not None and belief["labels"].get("archived") is not None


def _kept(rows: list[SearchRow], query: RecallQuery) -> list[SearchRow]:
    return [r for r in rows if query.include_archived or not _archived(r)]


_LARGE_SELECTIONS = LargeSelections()
"""The selections this process counted large lately (their count is skipped)."""

_TEXT_SEARCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-words")
"""Hybrid recall's text searches, run beside its vector searches, each on its own
pooled connection."""


@dataclass(frozen=True)
class _Words:
    """Hybrid recall's text search, running on its own pooled connection."""

    found: Future[list[SearchRow]]
    measured: bool
    """Whether it reads its candidates' similarities itself (the query's vector was
    known when it started); if not, :func:`_first_searches` reads them."""


def _words_first(
    log: EventLog, tenant_id: UUID, query: RecallQuery, search: _Search, now: datetime
) -> _Words | None:
    """Start hybrid recall's text search (none in the other modes) before the query is
    embedded: it needs the vector only for its candidates' similarities, so when the
    query is new it runs without, while the model embeds on the other core
    (:func:`_first_searches` then reads the similarities)."""
    if query.mode != "hybrid":
        return None
    words = replace(search, limit=(query.offset + query.k) * TEXT_OVERFETCH)
    found = _TEXT_SEARCHES.submit(_searched, log, tenant_id, words, now, exact=False, words=True)
    return _Words(found, measured=search.vector is not None)


def _first_searches(
    log: EventLog, tenant_id: UUID, search: _Search, now: datetime, words: _Words | None
) -> tuple[list[SearchRow], list[SearchRow], bool]:
    """Return the first vector search's memories, the text search's (``words``; none
    when None) with their similarities, and whether the vector search was exact (when
    the tenant and filters select few memories). One transaction: the vector
    candidates, then their state and, when the text search is done but did not read
    them, the similarities of its candidates the vector search did not find, in one
    round trip. The text search is never waited for inside the transaction: a
    transaction holding a pooled connection while waiting for a search that needs
    one could, with enough recalls at once, leave every connection waiting.
    Unfinished, its similarities are read after it, in a transaction of their own."""
    worded: list[SearchRow] | None = None
    with tenant_transaction(log.datastore, tenant_id, commit=False, pipelined=True) as cur:
        exact = search.selects_few(cur, tenant_id)
        near = search.candidates(cur, exact=exact, words=False)
        close = {row["memory_id"]: row["similarity"] for row in near}
        # Done nearly always when it did not read them: it ran while the model embedded.
        if words is not None and not words.measured and words.found.done():
            worded = words.found.result()
            state, similar = search.state(cur, near, now, similar=_unmeasured(worded, close))
            _measure(worded, close | similar)
        else:
            state, _ = search.state(cur, near, now)
    if worded is None and words is not None:
        worded = words.found.result()
        unmeasured = [] if words.measured else _unmeasured(worded, close)
        later: dict[UUID, float] = {}
        if unmeasured:
            with tenant_transaction(log.datastore, tenant_id, commit=False, pipelined=True) as cur:
                _, later = search.state(cur, [], now, similar=unmeasured)
        if not words.measured:
            _measure(worded, close | later)
    return _joined(near, state), worded or [], exact


def _unmeasured(worded: list[SearchRow], close: dict[UUID, float]) -> list[UUID]:
    """The text candidates ``worded`` whose similarity the vector search (``close``,
    by memory) did not measure."""
    return [r["memory_id"] for r in worded if r["memory_id"] not in close]


def _measure(worded: list[SearchRow], similarities: dict[UUID, float]) -> None:
    """Give each text candidate its similarity (None: no embedding of this model)."""
    for row in worded:
        row["similarity"] = similarities.get(row["memory_id"])


def _vector_limit(want: int, mode: RecallMode) -> int:
    """How many candidates the vector search asks for: :data:`HNSW_OVERFETCH` per memory
    wanted (:data:`TEXT_OVERFETCH` in hybrid mode), and at least the background's depth
    (:data:`BACKGROUND_RANK`), so that whether anything matches does not depend on ``k``.

    Hybrid asks for fewer: the fusion scores a memory's meaning by its lead over the
    background (the 20th nearest), so a memory past it adds nothing by meaning, and
    reading its state (a tenth of a millisecond each at 100,000 memories) was half of
    the vector step's time. It still fills ``k`` when the fusion finds fewer."""
    per = TEXT_OVERFETCH if mode == "hybrid" else HNSW_OVERFETCH
    return max(want * per, BACKGROUND_RANK)


def _nearest(
    find: Callable[..., list[SearchRow]],
    query: RecallQuery,
    want: int,
    exact: bool,
    rows: list[SearchRow] | None = None,
) -> tuple[list[SearchRow], Literal["hnsw", "exact"]]:
    """Return at least ``want`` memories nearest the query when that many exist
    (archived ones dropped unless asked for), and which search found them.

    The first search is exact when ``exact``, else on the index; ``rows`` are what
    it found when it already ran (hybrid recall's vector candidates)."""
    limit = _vector_limit(want, query.mode)
    if rows is None:
        rows = find(exact=exact, limit=limit)
    kept = _kept(rows, query)
    while len(kept) < want and (not exact or len(rows) == limit):
        # Short: the filters (or archived memories) left fewer than k. Exact search
        # over what the filters select; asked for more while archived ones crowd it.
        if exact:
            limit *= HNSW_OVERFETCH
        exact = True
        rows = find(exact=True, limit=limit)
        kept = _kept(rows, query)
    return kept, "exact" if exact else "hnsw"


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
    embedded unless ``min_similarity`` is above 0), ``hybrid`` by the two rankings
    fused (:mod:`palimpsest.projections.recall._fusion`), favouring the memories whose
    time falls in a month the query names
    (:mod:`palimpsest.projections.recall._named_months`). With ``min_similarity``, less
    similar memories (and memories matched by words that have no embedding yet) are
    left out, none when it is 0; without it, what matches neither by meaning nor by
    words (:func:`palimpsest.projections.recall._relevance.matches`). A memory possibly
    superseded by a newer one found with it ranks right below it, unless
    ``possible_supersessions`` is false.

    Raises:
        EmbedderUnavailableError: the query could not be embedded.
    """
    begun = time.perf_counter()
    want = query.offset + query.k
    embed = query.mode != "text" or bool(query.min_similarity)
    # A repeated query is not embedded again (:mod:`palimpsest.projections.recall.query_vectors`).
    vectors = query_vectors(embedder)
    vector = vectors.remembered(tenant_id, query.text) if embed else None
    first = _Search(
        log.datastore.schema,
        vector,
        embedder.model_id,
        embedder.dimension,
        query,
        _vector_limit(want, query.mode),
    )
    words = _words_first(log, tenant_id, query, first, now)
    started = time.perf_counter()
    if embed and vector is None:
        vector = vectors.vector(embedder, tenant_id, query.text)
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
    if query.mode == "text":
        by_text = _kept(find(exact=False, limit=want * HNSW_OVERFETCH, words=True), query)
    else:
        nearest, matched, exact = _first_searches(
            log, tenant_id, replace(first, vector=vector), now, words
        )
        by_vector, strategy = _nearest(find, query, want, exact, nearest)
        by_text = _kept(matched, query)
    searched = time.perf_counter()
    # The statement's join does not keep the candidates' order: each list is sorted.
    by_vector.sort(key=lambda r: (-(r["similarity"] or 0.0), str(r["memory_id"])))
    # Hybrid's words rank by their weight (what its text search kept), text mode's by
    # the text score.
    hybrid = query.mode == "hybrid"
    by_text.sort(
        key=lambda r: (
            -((r["word_weight"] if hybrid else r["text_score"]) or 0.0),
            str(r["memory_id"]),
        )
    )
    closest = Nearest.of([r["similarity"] or 0.0 for r in by_vector])
    places = fuse(
        [(r["memory_id"], round(r["similarity"] or 0.0, SIMILARITY_DECIMALS)) for r in by_vector],
        [(r["memory_id"], r["word_weight"] or 0.0) for r in by_text],
        background=closest.background,
    )
    if hybrid and (months := named_months(query.text)):
        places = dated(
            places, {r["memory_id"]: r["memory_time"] for r in by_text + by_vector}, months
        )
    worded = {r["memory_id"]: r for r in by_text}
    rows = worded | {r["memory_id"]: _with_words(r, worded.get(r["memory_id"])) for r in by_vector}
    kept = {
        memory_id: r
        for memory_id, r in rows.items()
        if matches(
            r["similarity"],
            r["word_share"],
            phrased=bool(r["phrased"]),
            mode=query.mode,
            min_similarity=query.min_similarity,
            nearest=closest,
        )
    }
    if query.possible_supersessions and kept:
        # One transaction after both searches: the pairs between their candidates, then
        # the whole lists of the answers. Each search reading every pair of its own
        # candidates cost each 3 to 6 ms of PostgreSQL at 2,000 templated facts (issue 48).
        with tenant_transaction(log.datastore, tenant_id, commit=False, pipelined=True) as cur:
            # Generic: the same plan suits any memories (each row found by key).
            run_unread(cur, "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
            schema = log.datastore.schema
            _pair(rows, superseding(cur, schema, list(rows), among=list(rows)))
            candidates = [*kept.values(), *_newer_of(kept, rows)]
            items = _rank(
                log, tenant_id, candidates, query, now, places, partial(superseding, cur, schema)
            )
    else:
        items = _rank(log, tenant_id, list(kept.values()), query, now, places, None)
    done = time.perf_counter()
    return RecallResult(
        items=items,
        strategy=strategy,
        embed_ms=(embedded - started) * 1000,
        search_ms=(done - embedded + started - begun) * 1000,
        timings={
            "index": (searched - embedded + started - begun) * 1000,
            "rank": (done - searched) * 1000,
        },
    )


def _pair(rows: dict[UUID, SearchRow], pairs: dict[UUID, list[UUID]]) -> None:
    """Give each of the candidates ``rows`` (both searches') the newer ones among them
    that may supersede it (``pairs``: :func:`superseding` of the candidates among
    themselves). Ranking needs no other pair: it places a newer memory above an older
    one found with it, and shows what may have replaced a memory when a search found
    it (:func:`_newer_of`). The whole lists are read for the answers alone
    (:func:`_rank`): on the templated facts of tests/benchmarks/agent_ops.py a memory
    holds 33 pairs on average, about 4 of them with another candidate."""
    for memory_id, row in rows.items():
        row["newer"] = pairs.get(memory_id, [])


def _newer_of(kept: dict[UUID, SearchRow], found: dict[UUID, SearchRow]) -> list[SearchRow]:
    """Return the memories ``found`` but left out of ``kept`` that may supersede a kept
    one: recall that shows a memory shows what may have replaced it, whether or not the
    replacement matches the query on its own ("I go to the gym on Tuesdays" found, "I've
    been going four times a week" with too few of the question's words and too little
    of its meaning)."""
    wanted = {n for r in kept.values() for n in r["newer"]}
    return [found[n] for n in wanted if n in found and n not in kept]


def _yields(older: SearchRow, newer: SearchRow) -> bool:
    """Whether a memory found possibly superseded by ``newer`` ranks below it: unless
    it holds every word of the query and the newer one lacks words that weigh
    (:data:`NAMING_WEIGHT`). Words that match exactly say which memory the query is
    about (a ticket's number, a name), not which one is current: "PAL-123" asks for
    that ticket, not for PAL-124 written after it. A newer one lacking only a common
    word of a question ("How *many* postcards have I added?") is about the same thing."""
    if (older["word_share"] or 0.0) < 1.0 or (newer["word_share"] or 0.0) >= 1.0:
        return True
    return (newer["word_weight"] or 0.0) >= NAMING_WEIGHT


def _with_words(row: SearchRow, worded: SearchRow | None) -> SearchRow:
    """Return a vector candidate with what the text search found of it (nothing when it
    did not find it)."""
    return SearchRow(
        **{
            **row,
            "text_score": worded["text_score"] if worded else None,
            "word_share": worded["word_share"] if worded else None,
            "word_weight": worded["word_weight"] if worded else None,
            "phrased": worded["phrased"] if worded else None,
        }
    )


def _score(row: SearchRow, mode: RecallMode, places: dict[UUID, Fused]) -> float:
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
    superseded: Callable[[list[UUID]], dict[UUID, list[UUID]]] | None,
) -> list[RecalledCurrent | RecalledPending]:
    """Rank by rounded relevance, salience, recency and id; with ``superseded`` (each
    memory's newer ones that may supersede it: :func:`superseding`), place each memory
    possibly superseded by a newer one among ``rows`` right below it (``newer``) and
    mark the answers with all of theirs; shape the ``k`` answers after the first
    ``offset``; stamp an access on each current one returned."""
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
    score = {r["memory_id"]: _score(r, query.mode, places) for r in rows}

    def key_of(r: SearchRow) -> tuple[Any, ...]:
        memory_id = r["memory_id"]
        return rank_key(
            score[memory_id], saliences.get(memory_id, 0.0), r["revision"], str(memory_id)
        )

    ordered = sorted(rows, key=key_of)
    if superseded is not None:
        ordered = conflicts_first(ordered, lambda r: r["memory_id"], lambda r: r["newer"], _yields)
    ordered = ordered[: query.offset + query.k]
    # Every pair of the answers, the newer one a candidate or not: read for them only.
    newer = (
        {} if superseded is None else superseded([r["memory_id"] for r in ordered[query.offset :]])
    )
    items: list[RecalledCurrent | RecalledPending] = []
    previous = key_of(ordered[query.offset - 1]) if 0 < query.offset <= len(ordered) else None
    first = _FIRST_KEY[query.mode]
    text_searched = query.mode != "vector"
    for r in ordered[query.offset :]:
        belief = current.get(r["memory_id"])
        # The score a reader sees, for the page only: ranking used the salience.
        salience = None if belief is None else score_from(belief, r, now)
        key = key_of(r)
        place = places.get(r["memory_id"])
        rank = RecallRank(
            mode=query.mode,
            relevance=round(relevance(r["similarity"], r["text_score"]), SIMILARITY_DECIMALS),
            fused=round(place.score, SIMILARITY_DECIMALS)
            if place and query.mode == "hybrid"
            else None,
            similarity=_rounded(r["similarity"], SIMILARITY_DECIMALS),
            in_named_month=place.in_named_month if place and query.mode == "hybrid" else None,
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
            "text_match": text_match(r["word_share"]) if text_searched else None,
            "possibly_superseded_by": newer.get(r["memory_id"], []),
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
"""The parts of :func:`rank_key` after the mode's score, in order."""

_FIRST_KEY: dict[RecallMode, DecidedBy] = {
    "vector": "similarity",
    "text": "relevance",
    "hybrid": "fused",
}
"""What the first part of :func:`rank_key` is called in each mode."""


def _decided_by(
    previous: tuple[Any, ...] | None, key: tuple[Any, ...], first: DecidedBy
) -> DecidedBy:
    """Return which part of the rank key put this memory below the previous one
    (``first`` names the mode's score), or ``possibly_superseded`` when the key would
    have ranked it above (a newer memory it may conflict with goes first)."""
    if previous is None:
        return "first"
    if key < previous:
        return "possibly_superseded"
    for name, a, b in zip((first, *_KEY_PARTS), previous, key, strict=True):
        if a != b:
            return name
    return "id"
