"""Recall's statements: the search's candidates, their state, and the count that
decides whether a search is exact. SQLAlchemy Core, shaped per call by
:func:`palimpsest.projections.views.statement.shaped_sql` and cached by shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Boolean, Float, Integer, Text, cast, func, null, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID

from palimpsest.projections.recall._filters import filter_conditions
from palimpsest.projections.recall._words import text_candidates
from palimpsest.projections.store.sql import tables_in
from palimpsest.projections.views.access_stamps import salience_columns
from palimpsest.projections.views.current_beliefs import due_deadlines
from palimpsest.projections.views.decay_inputs import faded
from palimpsest.projections.views.statement import events_table, inline, param

if TYPE_CHECKING:
    from sqlalchemy import Select

__all__ = [
    "search_statement",
    "selected_count",
    "similarity_statement",
    "state_statement",
    "vector_literal",
]


def vector_literal(values: list[float]) -> str:
    return "[" + ",".join(map(repr, values)) + "]"


def search_statement(
    schema: str,
    dimension: int | None,
    exact: bool,
    filtered: tuple[str, ...],
    topic: bool = False,
    words: bool = False,
    under: bool = False,
    weighted: bool = False,
) -> Select[Any]:
    """Return the candidates' query of :func:`search` (SQLAlchemy Core), for vectors
    of ``dimension`` and the filters on the columns ``filtered`` (and on ``%(topic)s``
    when ``topic``, on ``%(under)s`` when ``under``:
    :func:`palimpsest.projections.recall._filters.filter_conditions`): each candidate's
    memory, indexed version, ``similarity`` and ``text_score``. Their state is read
    by :func:`state_statement`.

    The nearest embeddings are ordered by cosine distance on
    ``embedding::vector(dimension)`` with ``dimension = N`` in the text: the
    expression and the predicate of the dimension's partial HNSW index, which
    serves the order unless ``exact`` adds ``+ 0`` (an expression no index
    serves). The tenant and the filters are in the same query. Parameters:
    ``q`` (the query vector, as text), ``model``, each filter by its column, and
    ``limit``.

    With ``words`` the candidates are those of the text search instead
    (:func:`palimpsest.projections.recall._words.text_candidates`, parameter ``words``; with
    their similarity to ``q`` unless ``dimension`` is None), in the same query.
    """
    tables = tables_in(schema)
    if words or dimension is None:
        t = tables["memory_texts"].alias("e")
        conditions = filter_conditions(tables, t, filtered, topic, under)
        near: Any = text_candidates(t, tables, conditions, dimension, weighted)
    else:
        near = _vector_candidates(tables, dimension, exact, filtered, topic, under)
    return select(*near.c)


def similarity_statement(schema: str, dimension: int) -> Select[Any]:
    """Return the cosine similarity to ``%(q)s`` of the embedding of ``%(model)s`` (of
    ``dimension``) of each of the memories ``%(ids)s`` that has one: the similarity
    the text search's candidates are reported and filtered by, read apart because
    hybrid recall's text search runs before the query is embedded."""
    e = tables_in(schema)["memory_embeddings"].alias("e")
    vector_type = Vector(dimension)
    query = cast(param("q", vector_type), vector_type)
    distance = cast(e.c.embedding, vector_type).cosine_distance(query)
    return select(e.c.memory_id, (inline(1) - distance).label("similarity")).where(
        e.c.memory_id == func.any_(param("ids", ARRAY(PG_UUID(as_uuid=True)))),
        e.c.model_id == param("model", e.c.model_id.type),
        e.c.dimension == inline(dimension),
    )


def _vector_candidates(
    tables: dict[str, Any],
    dimension: int,
    exact: bool,
    filtered: tuple[str, ...],
    topic: bool,
    under: bool,
) -> Any:
    e = tables["memory_embeddings"].alias("e")
    vector_type = Vector(dimension)
    query = cast(param("q", vector_type), vector_type)
    distance = cast(e.c.embedding, vector_type).cosine_distance(query)
    return (
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
            cast(null(), Float).label("word_share"),
            cast(null(), Float).label("word_weight"),
            cast(null(), Boolean).label("phrased"),
        )
        .where(
            e.c.model_id == param("model", e.c.model_id.type),
            e.c.dimension == inline(dimension),
            *filter_conditions(tables, e, filtered, topic, under),
        )
        # An expression the index cannot serve forces the exact plan.
        .order_by(distance + inline(0) if exact else distance)
        .limit(param("limit", Integer))
        .subquery("vector")
    )


def state_statement(schema: str) -> Select[Any]:
    """Return the state recall ranks and answers by, of the candidates ``%(ids)s``
    whose indexed versions' contents are ``%(digests)s`` (two arrays, in step), as
    of ``%(now)s``: watermark, belief, topic, salience inputs, content, due
    deadlines, the fade label and the memory's time (``memory_time``, None until the
    indexing drain dates it). A candidate without revision row or index row
    (not yet projected) is left out."""
    tables = tables_in(schema)
    n = (
        func.unnest(param("ids", ARRAY(PG_UUID(as_uuid=True))), param("digests", ARRAY(Text)))
        .table_valued("memory_id", "content_digest")
        .render_derived("n")
    )
    r = tables["revisions"].alias("r")
    b = tables["beliefs"].alias("b")
    m = tables["memory_index"].alias("m")
    first = events_table(schema).alias("first")
    a = tables["memory_access"].alias("a")
    c = tables["payloads"].alias("c")
    f = tables["memory_fades"].alias("f")
    t = tables["memory_texts"].alias("t")
    due = due_deadlines(tables, n.c.memory_id).with_only_columns(func.count())
    return select(
        n.c.memory_id,
        n.c.content_digest,
        m.c.topic,
        r.c.requested,
        r.c.published,
        b.c.belief,
        b.c.current_version_id,
        *salience_columns(m, first, a),
        c.c.content,
        due.scalar_subquery().label("due"),
        faded(f, b, a).label("faded"),
        f.c.faded_at,
        t.c.memory_time,
    ).select_from(
        n.join(r, r.c.memory_id == n.c.memory_id)
        .outerjoin(b, b.c.memory_id == n.c.memory_id)
        .join(m, m.c.memory_id == n.c.memory_id)
        .join(first, first.c.notification_id == m.c.position)
        .outerjoin(a, a.c.memory_id == n.c.memory_id)
        .outerjoin(c, c.c.digest == n.c.content_digest)
        .outerjoin(f, f.c.memory_id == n.c.memory_id)
        .outerjoin(t, t.c.memory_id == n.c.memory_id)
    )


def selected_count(schema: str, filtered: tuple[str, ...], topic: bool, under: bool) -> Select[Any]:
    """How many embeddings of ``%(model)s`` the filters select, up to ``%(upto)s``."""
    tables = tables_in(schema)
    e = tables["memory_embeddings"].alias("e")
    selected = (
        select(inline(1))
        .where(
            e.c.model_id == param("model", e.c.model_id.type),
            *filter_conditions(tables, e, filtered, topic, under),
        )
        .limit(param("upto", Integer))
        .subquery("s")
    )
    return select(func.count().label("n")).select_from(selected)
