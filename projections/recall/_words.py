"""Recall by words: the candidates of a full-text query over current versions.

The query's words become lexemes with the text search configuration the
index was built with (:data:`~palimpsest.projections.store.schema.TEXT_SEARCH_CONFIG`):
stop words dropped, words stemmed, identifiers such as ``PAL-123`` or
``25:50`` kept as the same tokens a memory holding them was indexed with.
A memory is a candidate when it holds *any* of the query's matching lexemes (a
question rarely repeats every word of the memory that answers it): every lexeme
but the common ones, held by more than :data:`COMMON_SHARE` of the tenant's
memories and more than :data:`COMMON_FLOOR` (``lexeme_counts``); the rarest the
tenant holds always matches. A common word selects nothing but counts in the
ranking, as the rest do. Its text
score, in [0, 1), ranks the memories holding *every* lexeme first (at or above
:data:`EVERY_WORD`: an identifier such as ``PAL-123`` is two lexemes, and the
memory holding both beats one holding ``PAL`` alone), then by ``ts_rank_cd``
(cover density, normalisation :data:`RANK_NORMALISATION`) of the document
against the query's lexemes joined by ``|``.

The matches are read from ``memory_lexemes`` (a btree of tenant, lexeme and
memory), not from the GIN index of ``memory_texts``: under row-level security
PostgreSQL uses an index only for leakproof operators, and ``@@`` is not.
Even without its common words a query can match much of a tenant: the memories
holding the most of its matching lexemes, at most :data:`CANDIDATE_CAP`, are
ranked, so ranking's cost stays bounded.

The score is computed from those rows, not from the documents: against a query
of words joined by ``|``, every position holding one of them is a cover of its
own, so ``ts_rank_cd`` depends only on how many positions hold the query's words
(:func:`cover_density`), and "holds every word" only on which it holds. Each
row carries its lexeme's position count (``occurrences``) in the index the
matches are found with; a candidate's common words, which did not select it,
are looked up by key for the capped candidates only. The documents are never
read (tests/projections/recall/test_text_score.py holds this equal to
``ts_rank_cd`` on the documents).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    Boolean,
    Float,
    Integer,
    Text,
    Uuid,
    case,
    cast,
    func,
    not_,
    null,
    select,
    type_coerce,
    union,
)
from sqlalchemy.dialects.postgresql import (
    ARRAY,
    DOUBLE_PRECISION,
    REAL,
    REGCONFIG,
    TSQUERY,
    aggregate_order_by,
)

from palimpsest.projections.store.lexeme_counts import ANY_LEXEME
from palimpsest.projections.store.schema import TEXT_SEARCH_CONFIG
from palimpsest.projections.views.statement import inline, param

if TYPE_CHECKING:
    from sqlalchemy import CTE, Select, Subquery, Table
    from sqlalchemy.sql.elements import ColumnElement

__all__ = [
    "BM25_K1",
    "CANDIDATE_CAP",
    "COMMON_FLOOR",
    "COMMON_SHARE",
    "EVERY_WORD",
    "RANK_NORMALISATION",
    "cover_density",
    "query_lexemes",
    "query_phrases",
    "query_words",
    "rarity",
    "saturated",
    "text_candidates",
]

CANDIDATE_CAP = 500
"""At most this many memories, those holding the most of the query's matching lexemes,
are ranked: the bound on ranking's cost when the words are common."""

COMMON_SHARE = 0.01
"""A lexeme held by more than this share of the tenant's memories (and by more than
:data:`COMMON_FLOOR`) is common: it selects no candidates (the rarer words of the query
do) but still counts in their ranking. The rarest lexeme the tenant holds always
selects, so a query of common words still finds. With :data:`COMMON_FLOOR` it only
matters above 100,000 memories; at 100,000, 1% rather than 5% halved the text
search's time and ranked the knowledge-updates answers as well or better
(docs/recall.md, 2026-12-04)."""

COMMON_FLOOR = 1000
"""No lexeme held by this many memories or fewer is common: below it, matching all of
its rows costs little, and a small tenant's words are all "common" by share."""

EVERY_WORD = 0.5
"""Text scores at or above this belong to memories holding every lexeme of the query;
the cover-density rank, halved, adds less than this."""

RANK_NORMALISATION = 32
"""The ``ts_rank_cd`` normalisation the score reproduces: ``rank / (rank + 1)``, a
score in [0, 1)."""

BM25_K1 = 1.2
"""BM25's term frequency saturation (the usual value): a lexeme held at many positions
counts at most ``1 + BM25_K1`` times one held once."""

_POSITION_WEIGHT = 0.1
"""``ts_rank_cd``'s default weight of an unlabelled position (label D), a ``real``."""


def query_lexemes() -> ColumnElement[Any]:
    """Return the lexemes of ``%(words)s`` (a ``text[]``, distinct), parsed with the
    index's configuration."""
    config = cast(inline(TEXT_SEARCH_CONFIG), REGCONFIG)
    return func.tsvector_to_array(func.to_tsvector(config, param("words", Text)))


def query_phrases() -> ColumnElement[Any]:
    """Return the phrases of ``%(words)s``: each of its lexemes followed by the next one
    at the next position (no stop word between them), as a ``tsquery`` of those pairs
    joined by ``|`` (``'univers' <-> 'studio' | ...``); NULL for a query of fewer than
    two such words.

    A memory holding one of them matches by words whatever share of the query's words it
    holds (:func:`palimpsest.projections.recall._relevance.matches`): a question that
    names "Universal Studios" among ten other words is about the memory that says it.
    The pairs are read from the query as the index reads a memory (so a memory saying
    the query's words holds its phrases) and again with hyphens between letters read as
    spaces: PostgreSQL's parser puts a compound's whole (``wars-rel``) before its parts,
    so "Star Wars-related" would otherwise not hold the phrase of a memory saying "Star
    Wars". The lexemes are quoted as ``tsquery`` input (:func:`_quoted`), not stemmed
    again."""
    config = cast(inline(TEXT_SEARCH_CONFIG), REGCONFIG)
    words = param("words", Text)
    spaced = func.regexp_replace(
        words, inline("([[:alpha:]])-(?=[[:alpha:]])"), inline("\\1 "), inline("g")
    )
    pairs = union(*(_adjacent(func.to_tsvector(config, text)) for text in (words, spaced)))
    distinct = pairs.subquery()
    joined = select(
        func.string_agg(distinct.c.pair, aggregate_order_by(inline(" | "), distinct.c.pair))
    )
    return cast(joined.scalar_subquery(), TSQUERY)


def _adjacent(vector: ColumnElement[Any]) -> Select[Any]:
    """Return a ``tsquery`` phrase (text, column ``pair``) of each lexeme of ``vector``
    and the lexeme at the next position."""
    lexemes = func.unnest(vector).table_valued("lexeme", "positions", "weights").render_derived()
    placed = select(lexemes.c.lexeme, func.unnest(lexemes.c.positions).label("pos")).subquery()
    by_position = placed.c.pos.asc()
    paired = select(
        placed.c.lexeme,
        func.lead(placed.c.lexeme).over(order_by=by_position).label("next"),
        (func.lead(placed.c.pos).over(order_by=by_position) - placed.c.pos).label("gap"),
    ).subquery()
    pair = _quoted(paired.c.lexeme) + inline(" <-> ") + _quoted(paired.c.next)
    return select(pair.label("pair")).where(paired.c.gap == inline(1))


def _quoted(lexeme: ColumnElement[Any]) -> ColumnElement[Any]:
    """Return ``lexeme`` quoted as ``tsquery`` input: its quotes doubled (a URL's path
    keeps them: ``example.com/a'b``). The parser keeps no backslash in a lexeme (it is
    a blank to it), so none is escaped."""
    return inline("'") + func.replace(lexeme, inline("'"), inline("''")) + inline("'")


def query_words(tables: dict[str, Table]) -> CTE:
    """Return the query's words (a common table expression, ``words``, of one row):
    ``kept``, the lexemes of ``%(words)s`` that select candidates, all but the common
    ones (:data:`COMMON_SHARE`, :data:`COMMON_FLOOR`, by ``lexeme_counts``) and always
    the rarest the tenant holds; ``common``, the others; ``total``, how many lexemes
    the query has. Each array is NULL (matching nothing) when it would be empty."""
    c = tables["lexeme_counts"].alias("c")
    w = select(func.unnest(query_lexemes()).label("lexeme")).subquery("w")
    held = func.coalesce(c.c.memories, inline(0))
    per = (
        select(
            w.c.lexeme,
            held.label("held"),
            func.min(func.nullif(held, inline(0))).over().label("rarest"),
        )
        .select_from(w.outerjoin(c, c.c.lexeme == w.c.lexeme))
        .subquery("per")
    )
    documents = func.coalesce(
        select(c.c.memories).where(c.c.lexeme == inline(ANY_LEXEME)).scalar_subquery(), inline(0)
    )
    common = per.c.held > func.greatest(
        documents * inline(COMMON_SHARE),
        inline(COMMON_FLOOR),
        func.coalesce(per.c.rarest, inline(0)),
    )
    weight = rarity(cast(documents, DOUBLE_PRECISION), cast(per.c.held, DOUBLE_PRECISION))
    by_lexeme = per.c.lexeme.asc()
    return select(
        func.array_agg(aggregate_order_by(per.c.lexeme, by_lexeme))
        .filter(not_(common))
        .label("kept"),
        func.array_agg(aggregate_order_by(weight, by_lexeme))
        .filter(not_(common))
        .label("kept_weights"),
        func.array_agg(aggregate_order_by(per.c.lexeme, by_lexeme)).filter(common).label("common"),
        func.array_agg(aggregate_order_by(weight, by_lexeme))
        .filter(common)
        .label("common_weights"),
        func.count().label("total"),
        func.sum(weight).label("ideal"),
        query_phrases().label("phrases"),
    ).cte("words")


def rarity(documents: ColumnElement[Any], held: ColumnElement[Any]) -> ColumnElement[float]:
    """Return a lexeme's weight (BM25's inverse document frequency, Robertson and
    Zaragoza 2009, the variant that is never negative): ``ln(1 + (N - n + 0.5) /
    (n + 0.5))`` for a tenant of ``documents`` (N) memories of which ``held`` (n) hold
    it. A word most memories hold weighs near 0, one a single memory holds ``ln(N)``."""
    half = inline(0.5)
    return func.ln(inline(1.0) + (documents - held + half) / (held + half))


def saturated(occurrences: ColumnElement[Any]) -> ColumnElement[float]:
    """Return BM25's term frequency factor of a lexeme a document holds at
    ``occurrences`` positions: 1 for one, rising to at most ``1 + BM25_K1``, so a word
    said twice counts more than once but never as much as two different words.
    Without BM25's length normalisation (its ``b`` = 0): a memory's length is not
    among the rows the search reads, and LoCoMo's questions ranked worse with it
    (docs/recall.md)."""
    k1 = inline(BM25_K1)
    n = cast(occurrences, DOUBLE_PRECISION)
    return cast(n * (k1 + inline(1.0)) / (n + k1), DOUBLE_PRECISION)


def cover_density(occurrences: ColumnElement[Any]) -> ColumnElement[float]:
    """Return ``ts_rank_cd(document, query, RANK_NORMALISATION)`` (a ``real``) of a
    document holding the words of a ``|`` query at ``occurrences`` positions in all.

    Against words joined by ``|`` each position holding one is a cover of its own,
    worth its weight (label D, :data:`_POSITION_WEIGHT`, as ``ts_rank_cd`` has it: a
    ``real`` summed in double precision), and the normalisation divides the sum by
    itself plus one; the result is a ``real``, as ``ts_rank_cd``'s is.
    """
    weight = cast(cast(inline(_POSITION_WEIGHT), REAL), DOUBLE_PRECISION)
    covered = cast(occurrences, DOUBLE_PRECISION) * weight
    return cast(covered / (covered + inline(1.0)), REAL)


def text_candidates(
    texts: Table | Any,
    tables: dict[str, Table],
    conditions: list[ColumnElement[bool]],
    dimension: int | None,
    weighted: bool = False,
) -> Subquery:
    """Return the text search (a subquery, ``text``): the memories of ``texts`` (an
    alias of ``memory_texts``) matching ``%(words)s`` under ``conditions``, best
    first, at most ``%(limit)s``, with the columns of the vector search's candidates.

    The matches are found in ``memory_lexemes`` (equality on text is leakproof, so
    its btree serves the search under row-level security; ``@@`` on the GIN index
    would not be used): each memory's count of the query's kept lexemes and the
    positions holding them, the memories holding the most kept (at most
    :data:`CANDIDATE_CAP`), then, for those only, the common lexemes they hold, by
    key. Only the ``%(limit)s`` best are read from ``texts``.

    ``text_score`` is :data:`EVERY_WORD` for a memory holding every lexeme of the
    query, plus the cover-density rank (:func:`cover_density`) times
    :data:`EVERY_WORD`; ``word_share`` the share of the query's lexemes it holds.
    ``similarity`` is the cosine similarity of the memory's embedding of ``%(model)s``
    to ``%(q)s`` when a ``dimension`` is given (hybrid recall reports and filters on
    it), else NULL. ``word_weight`` is the share of the query's word weight it holds:
    each lexeme it holds weighs its rarity in the tenant (:func:`rarity`) times how
    often it holds it (:func:`saturated`), over the weight of every lexeme of the query
    held once (1 for a memory holding each once; more when repeated). The best
    ``%(limit)s`` are those of the best ``word_weight`` when ``weighted`` (hybrid
    recall's words), else of the best ``text_score`` (text mode). ``phrased``, when
    ``weighted``, says whether the memory holds one of the query's phrases
    (:func:`query_phrases`; its document is read for the ``%(limit)s`` best only); NULL
    otherwise.
    """
    t = texts
    words = query_words(tables)
    x = tables["memory_lexemes"].alias("x")
    kept = cast(select(words.c.kept).scalar_subquery(), ARRAY(Text))
    # Coerced, not cast: indexing a CAST(...) needs parentheses SQLAlchemy does not add.
    kept_weights = type_coerce(
        select(words.c.kept_weights).scalar_subquery(), ARRAY(DOUBLE_PRECISION)
    )
    hits = (
        select(
            x.c.memory_id,
            func.count().label("held"),
            func.sum(x.c.occurrences).label("occurs"),
            func.sum(
                kept_weights[func.array_position(kept, x.c.lexeme)] * saturated(x.c.occurrences)
            ).label("weighs"),
        )
        .where(x.c.lexeme == func.any_(kept))
        .group_by(x.c.memory_id)
        .subquery("hits")
    )
    order = (hits.c.held.desc(), hits.c.memory_id)
    described = (
        t.c.version_id,
        t.c.content_digest,
        t.c.revision,
        t.c.memory_type,
        t.c.scope,
        t.c.project,
    )
    if conditions:
        # The filters are on the memory's row: the matches are cut after them, and
        # the row read for them comes along.
        top = (
            select(hits, *described)
            .select_from(hits.join(t, t.c.memory_id == hits.c.memory_id))
            .where(*conditions)
            .order_by(*order)
            .limit(inline(CANDIDATE_CAP))
            .cte("top")
        )
    else:
        # Cut first: only the best are read from texts, after ranking.
        top = select(hits).order_by(*order).limit(inline(CANDIDATE_CAP)).cte("top")
    # The common words the kept candidates hold, in one index-only scan of the key
    # (each common lexeme with each candidate): looked up per candidate instead, the
    # planner walked each one's rows through the heap.
    y = tables["memory_lexemes"].alias("y")
    common = cast(select(words.c.common).scalar_subquery(), ARRAY(Text))
    common_weights = type_coerce(
        select(words.c.common_weights).scalar_subquery(), ARRAY(DOUBLE_PRECISION)
    )
    kept_ids = cast(select(func.array_agg(top.c.memory_id)).scalar_subquery(), ARRAY(Uuid))
    rest = (
        select(
            y.c.memory_id,
            func.count().label("held"),
            func.sum(y.c.occurrences).label("occurs"),
            func.sum(
                common_weights[func.array_position(common, y.c.lexeme)] * saturated(y.c.occurrences)
            ).label("weighs"),
        )
        .where(
            common.is_not(None),  # checked once: no common word, no scan
            y.c.lexeme == func.any_(common),
            y.c.memory_id == func.any_(kept_ids),
        )
        .group_by(y.c.memory_id)
        .subquery("rest")
    )
    total = select(words.c.total).scalar_subquery()
    held = top.c.held + func.coalesce(rest.c.held, inline(0))
    every = case((held == total, inline(EVERY_WORD)), else_=inline(0.0))
    occurs = top.c.occurs + func.coalesce(rest.c.occurs, inline(0))
    score = cast(every, DOUBLE_PRECISION) + cast(cover_density(occurs), DOUBLE_PRECISION) * cast(
        inline(EVERY_WORD), DOUBLE_PRECISION
    )
    share = cast(held, DOUBLE_PRECISION) / func.nullif(cast(total, DOUBLE_PRECISION), inline(0.0))
    ideal = select(words.c.ideal).scalar_subquery()
    weighs = (top.c.weighs + func.coalesce(rest.c.weighs, inline(0.0))) / func.nullif(
        ideal, inline(0.0)
    )
    ranked = (
        select(
            top.c.memory_id,
            *([top.c[c.name] for c in described] if conditions else []),
            score.label("text_score"),
            share.label("word_share"),
            weighs.label("word_weight"),
        )
        .select_from(top.outerjoin(rest, rest.c.memory_id == top.c.memory_id))
        .order_by((weighs if weighted else score).desc(), top.c.memory_id)
        .limit(param("limit", Integer))
        .subquery("ranked")
    )
    if conditions:
        row: Any = ranked
        source: Any = ranked
    else:
        row = t
        source = ranked.join(t, t.c.memory_id == ranked.c.memory_id)
    phrased: ColumnElement[Any] = cast(null(), Boolean)
    if weighted:
        # Only the best few are read for their documents, by key (the filters' rows
        # were read before the cut, without them).
        document = t
        if conditions:
            document = tables["memory_texts"].alias("d")
            source = source.join(document, document.c.memory_id == ranked.c.memory_id)
        phrases = select(words.c.phrases).scalar_subquery()
        phrased = func.coalesce(document.c.document.op("@@")(phrases), inline(False))
    if dimension is None:
        similarity: ColumnElement[Any] = cast(null(), Float)
    else:
        e = tables["memory_embeddings"].alias("te")
        vector_type = Vector(dimension)
        query = cast(param("q", vector_type), vector_type)
        distance = cast(e.c.embedding, vector_type).cosine_distance(query)
        similarity = inline(1) - distance
        source = source.outerjoin(
            e,
            (e.c.memory_id == ranked.c.memory_id)
            & (e.c.model_id == param("model", e.c.model_id.type))
            & (e.c.dimension == inline(dimension)),
        )
    return (
        select(
            ranked.c.memory_id,
            row.c.version_id,
            row.c.content_digest,
            row.c.revision,
            row.c.memory_type,
            row.c.scope,
            row.c.project,
            similarity.label("similarity"),
            ranked.c.text_score,
            ranked.c.word_share,
            ranked.c.word_weight,
            phrased.label("phrased"),
        )
        .select_from(source)
        .subquery("text")
    )
