"""Recall by words: the candidates of a full-text query over current versions.

The query's words become lexemes with the text search configuration the
index was built with (:data:`~projections.store.schema.TEXT_SEARCH_CONFIG`):
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
(cover density: the query's words close together count more).

The matches are read from ``memory_lexemes`` (a btree of tenant, lexeme and
memory), not from the GIN index of ``memory_texts``: under row-level security
PostgreSQL uses an index only for leakproof operators, and ``@@`` is not.
Even without its common words a query can match much of a tenant: the memories
holding the most of its matching lexemes, at most :data:`CANDIDATE_CAP`, are
ranked, so ranking's cost stays bounded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Float, Integer, Text, case, cast, func, null, select
from sqlalchemy.dialects.postgresql import ARRAY, REGCONFIG, TSQUERY

from projections.store.lexeme_counts import ANY_LEXEME
from projections.store.schema import TEXT_SEARCH_CONFIG
from projections.views.statement import inline, param

if TYPE_CHECKING:
    from sqlalchemy import Subquery, Table
    from sqlalchemy.sql.elements import ColumnElement

__all__ = [
    "CANDIDATE_CAP",
    "COMMON_FLOOR",
    "COMMON_SHARE",
    "EVERY_WORD",
    "RANK_NORMALISATION",
    "matching_lexemes",
    "query_lexemes",
    "text_candidates",
    "text_query",
]

CANDIDATE_CAP = 500
"""At most this many memories, those holding the most of the query's matching lexemes,
are ranked: the bound on ranking's cost when the words are common."""

COMMON_SHARE = 0.05
"""A lexeme held by more than this share of the tenant's memories (and by more than
:data:`COMMON_FLOOR`) is common: it selects no candidates (the rarer words of the query
do) but still counts in their ranking. The rarest lexeme the tenant holds always
selects, so a query of common words still finds."""

COMMON_FLOOR = 1000
"""No lexeme held by this many memories or fewer is common: below it, matching all of
its rows costs little, and a small tenant's words are all "common" by share."""

EVERY_WORD = 0.5
"""Text scores at or above this belong to memories holding every lexeme of the query;
the cover-density rank, halved, adds less than this."""

RANK_NORMALISATION = 32
"""``ts_rank_cd``'s normalisation: ``rank / (rank + 1)``, a score in [0, 1)."""


def text_query(joiner: str) -> ColumnElement[Any]:
    """Return the ``tsquery`` of ``%(words)s``: its lexemes joined by ``joiner``
    (``|`` for any, ``&`` for all), NULL when it has none (NULL matches nothing).

    The lexemes come from ``to_tsvector`` with the index's configuration and are
    quoted into the query as they are, so a query word is normalised exactly as
    the memories' words were (``to_tsquery`` would stem the stems again).
    """
    lexeme = func.unnest(query_lexemes())
    word = lexeme.column_valued("l")
    joined = func.string_agg(func.quote_literal(word), inline(f" {joiner} "))
    return cast(select(func.nullif(joined, inline(""))).scalar_subquery(), TSQUERY)


def query_lexemes() -> ColumnElement[Any]:
    """Return the lexemes of ``%(words)s`` (a ``text[]``, distinct), parsed with the
    index's configuration."""
    config = cast(inline(TEXT_SEARCH_CONFIG), REGCONFIG)
    return func.tsvector_to_array(func.to_tsvector(config, param("words", Text)))


def matching_lexemes(tables: dict[str, Table]) -> ColumnElement[Any]:
    """Return the lexemes of ``%(words)s`` that select candidates (a ``text[]``): all
    but the common ones (:data:`COMMON_SHARE`, :data:`COMMON_FLOOR`, by
    ``lexeme_counts``), and always the rarest the tenant holds; NULL (matching
    nothing) for a query without lexemes."""
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
    common = func.greatest(
        documents * inline(COMMON_SHARE),
        inline(COMMON_FLOOR),
        func.coalesce(per.c.rarest, inline(0)),
    )
    kept = select(func.array_agg(per.c.lexeme)).where(per.c.held <= common).scalar_subquery()
    return cast(kept, ARRAY(Text))  # an array to match any of, not a subquery's rows


def text_candidates(
    texts: Table | Any,
    tables: dict[str, Table],
    conditions: list[ColumnElement[bool]],
    dimension: int | None,
) -> Subquery:
    """Return the text search (a subquery, ``text``): the memories of ``texts`` (an
    alias of ``memory_texts``) matching ``%(words)s`` under ``conditions``, best
    first, at most ``%(limit)s``, with the columns of the vector search's candidates.

    The matches are found in ``memory_lexemes`` (equality on text is leakproof, so
    its btree serves the search under row-level security; ``@@`` on the GIN index
    would not be used): each memory's count of the query's lexemes, the memories
    holding the most kept (at most :data:`CANDIDATE_CAP`), and only those are
    read from ``texts`` by primary key and ranked.

    ``text_score`` is the scaled cover-density rank. ``similarity`` is the cosine
    similarity of the memory's embedding of ``%(model)s`` to ``%(q)s`` when a
    ``dimension`` is given (hybrid recall reports and filters on it), else NULL.
    """
    t = texts
    x = tables["memory_lexemes"].alias("x")
    wanted = query_lexemes()
    hits = (
        select(x.c.memory_id, func.count().label("held"))
        .where(x.c.lexeme == func.any_(matching_lexemes(tables)))
        .group_by(x.c.memory_id)
        .subquery("hits")
    )
    order = (hits.c.held.desc(), hits.c.memory_id)
    columns = (
        t.c.memory_id,
        t.c.version_id,
        t.c.content_digest,
        t.c.revision,
        t.c.memory_type,
        t.c.scope,
        t.c.project,
        t.c.document,
        hits.c.held,
    )
    if conditions:
        # The filters are on the memory's row: the matches are cut after them.
        matched = (
            select(*columns)
            .select_from(hits.join(t, t.c.memory_id == hits.c.memory_id))
            .where(*conditions)
            .order_by(*order)
            .limit(inline(CANDIDATE_CAP))
            .subquery("matched")
        )
    else:
        # Cut first, so only the kept candidates' documents are read.
        top = select(hits).order_by(*order).limit(inline(CANDIDATE_CAP)).subquery("top")
        matched = (
            select(*columns[:-1], top.c.held)
            .select_from(top.join(t, t.c.memory_id == top.c.memory_id))
            .subquery("matched")
        )
    # From the document: the matching may have left common lexemes out.
    every = case(
        (func.tsvector_to_array(matched.c.document).op("@>")(wanted), inline(EVERY_WORD)),
        else_=inline(0.0),
    )
    score = every + func.ts_rank_cd(
        matched.c.document, text_query("|"), inline(RANK_NORMALISATION)
    ) * inline(EVERY_WORD)
    # Ranked and cut first: the similarity is computed for the candidates kept only.
    ranked = (
        select(
            matched.c.memory_id,
            matched.c.version_id,
            matched.c.content_digest,
            matched.c.revision,
            matched.c.memory_type,
            matched.c.scope,
            matched.c.project,
            score.label("text_score"),
        )
        .order_by(score.desc(), matched.c.memory_id)
        .limit(param("limit", Integer))
        .subquery("ranked")
    )
    if dimension is None:
        similarity: ColumnElement[Any] = cast(null(), Float)
        source: Any = ranked
    else:
        e = tables["memory_embeddings"].alias("te")
        vector_type = Vector(dimension)
        query = cast(param("q", vector_type), vector_type)
        distance = cast(e.c.embedding, vector_type).cosine_distance(query)
        similarity = inline(1) - distance
        source = ranked.outerjoin(
            e,
            (e.c.memory_id == ranked.c.memory_id)
            & (e.c.model_id == param("model", e.c.model_id.type))
            & (e.c.dimension == inline(dimension)),
        )
    return (
        select(
            ranked.c.memory_id,
            ranked.c.version_id,
            ranked.c.content_digest,
            ranked.c.revision,
            ranked.c.memory_type,
            ranked.c.scope,
            ranked.c.project,
            similarity.label("similarity"),
            ranked.c.text_score,
        )
        .select_from(source)
        .subquery("text")
    )
