"""The forgetting pass's candidates: stale single memories, and pairs that may conflict.

The rules of the forgetting design (seed 000, "Candidate query"), read at one
``now`` for one tenant. Nothing here judges: a judge (a model or a person)
decides what each candidate is.

- **A memory's time** is :mod:`palimpsest.domain.memory_time`'s (the latest
  ``captured_at`` among the observations its current version's active support
  cites, else when that version was recorded), read for every live memory in one
  query per run by :mod:`palimpsest.projections.views.memory_times`, as the decay
  cycle reads it.
- **Newer neighbours** of a memory: the ``neighbours`` most similar (cosine) live
  memories of its type, scope and project (``IS NOT DISTINCT FROM``) whose time
  is later, at or above ``pair_floor`` when it is set.
- **Freshness**: the latest of the memory's time, its newer neighbours' times
  and its last review (the latest ``decided_at`` of a proposal about it that a
  person decided, or ``created_at`` of one the pass dismissed).
- **Stale singles**: live (not archived, not erased) memories of the types in
  :data:`STALE_TYPES` whose freshness is older than ``now - stale_window``; most
  stale first, capped; each with its newer neighbours, most similar first.
- **Pairs**: live memories of one of :data:`PAIRED_TYPES`, of one type, scope and
  project, one among the other's ``pair_k`` nearest (see :class:`PassSettings`
  for the ranking), oriented newer first by time; pairs whose older side is
  stale first, then the nearest; capped. ``event`` memories repeat by
  construction and ``note`` is free-form: neither is ever paired.
- **Anti-joins**: no pair joined by an edge that was not retracted; no single
  with a proposal about it, and no pair with a proposal about it (about the
  older memory alone, or relating the two), created after the members'
  *content* freshness (their times and their newer neighbours' times, reviews
  left out: a review is itself a proposal's end, and counting it would reopen
  the very verdict it closed). A verdict therefore stays final until a newer
  memory, or a new version, moves the content freshness past it.

docs/candidates.md ("Forgetting-pass pairs") has the measurement that chose the
defaults of :class:`PassSettings`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import (
    BigInteger,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    Text,
    Uuid,
    all_,
    and_,
    case,
    cast,
    column,
    func,
    null,
    select,
    true,
    tuple_,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY, REGCONFIG, TSQUERY

from palimpsest.domain.memory import Memory
from palimpsest.projections.store.sql import schema_query, tables_in
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.candidates import PAIRED_TYPES, cosine_similarity, same_kind
from palimpsest.projections.views.current_beliefs import unarchived
from palimpsest.projections.views.memory_times import date_memories
from palimpsest.projections.views.statement import any_of, inline, json_field, param, shaped_sql

if TYPE_CHECKING:
    from sqlalchemy import CompoundSelect, Select

    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "CandidatePair",
    "Neighbour",
    "PassCandidates",
    "PassSettings",
    "STALE_TYPES",
    "StaleSingle",
    "TEXT_SEARCH_CONFIG",
    "select_candidates",
]

STALE_TYPES = ("decision", "preference", "blocker", "fact")
"""Memory types that can be stale singles (``event`` and ``note`` never are)."""

TEXT_SEARCH_CONFIG = "english"
"""The PostgreSQL text search configuration of the full-text rank fused into pairs."""


class PassSettings(BaseSettings):
    """How the forgetting pass picks its candidates (``PALIMPSEST_STALE_WINDOW_DAYS`` …).

    Pairs: for each live memory of a paired type, the ``pair_shortlist`` nearest
    by cosine (within the filters and the floor) are ranked, with ``pair_fusion``
    ``rrf``, by reciprocal rank fusion of that cosine rank and a full-text rank
    (``ts_rank`` of the other memory's text against this one's words, normalised
    by length), ``1 / (rrf_constant + rank)`` each; with ``cosine``, by cosine
    alone. The ``pair_k`` best make pairs, in either direction, so a memory is in
    about ``2 * pair_k`` pairs at most on average and usually fewer.
    """

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    stale_window_days: int = Field(default=30, ge=1, le=36_500)
    """A memory whose freshness is older than this many days is stale."""
    singles_cap: int = Field(default=60, ge=0, le=10_000)
    """Stale singles per tenant per run, at most."""
    pairs_cap: int = Field(default=40, ge=0, le=10_000)
    """Pairs per tenant per run, at most."""
    neighbours: int = Field(default=3, ge=0, le=50)
    """Newer neighbours each single carries (and its freshness counts)."""
    pair_k: int = Field(default=2, ge=1, le=50)
    """Nearest memories per memory that make pairs."""
    pair_floor: float | None = Field(default=0.25, ge=-1.0, le=1.0)
    """Cosine similarity below which two memories never pair (nor neighbour). 0.25 is
    the highest floor that lost none of the dev split's true updates (0.91 of them,
    2.94 candidates per memory, against 3.00 without; 0.30 loses two): it keeps a
    small tenant's nearest-but-unrelated memories (similarity near 0) from any judge.
    ``None`` pairs the nearest however far they are."""
    pair_fusion: Literal["rrf", "cosine"] = "rrf"
    """How pairs are ranked: cosine fused with a full-text rank, or cosine alone."""
    pair_shortlist: int = Field(default=20, ge=1, le=500)
    """Nearest by cosine that the full-text rank re-ranks (``rrf`` only)."""
    rrf_constant: int = Field(default=60, ge=0, le=1000)
    """The constant of reciprocal rank fusion."""

    @property
    def stale_window(self) -> timedelta:
        """The stale window as a duration."""
        return timedelta(days=self.stale_window_days)


@dataclass(frozen=True)
class Neighbour:
    """A newer memory of the same type, scope and project, near a stale one."""

    memory_id: UUID
    similarity: float
    """Cosine similarity of the two current versions' embeddings."""
    memory_time: datetime


@dataclass(frozen=True)
class StaleSingle:
    """A memory nothing has touched for the stale window, with its newer neighbours."""

    memory_id: UUID
    memory_type: str
    freshness: datetime
    """The latest of its time, its newer neighbours' times and its last review."""
    memory_time: datetime
    newer: list[Neighbour]
    """Up to ``neighbours``, most similar first."""


@dataclass(frozen=True)
class CandidatePair:
    """Two memories of one type, scope and project that may conflict, newer first."""

    older_id: UUID
    newer_id: UUID
    similarity: float
    """Cosine similarity of the two current versions' embeddings."""
    older_stale: bool
    older_time: datetime
    newer_time: datetime
    score: float
    """What ranked the pair (after staleness): its fused score, or the similarity."""


@dataclass(frozen=True)
class PassCandidates:
    """What one run of the forgetting pass would send to its judge."""

    singles: list[StaleSingle]
    pairs: list[CandidatePair]


@dataclass
class _Live:
    """A live memory as the rules read it."""

    memory_id: UUID
    memory_type: str
    version_id: UUID
    position: int
    support: set[str]
    time: datetime | None = None


def _live_memories(schema: str) -> Select[Any]:
    """Live memories of ``%(types)s``: a current version, neither archived nor erased."""
    tables = tables_in(schema)
    b = tables["beliefs"].alias("b")
    m = tables["memory_index"].alias("m")
    return (
        select(
            b.c.memory_id,
            b.c.memory_type,
            b.c.current_version_id,
            m.c.position,
            json_field(b.c.belief, "support").label("support"),
        )
        .select_from(b.join(m, m.c.memory_id == b.c.memory_id))
        .where(
            any_of(b.c.memory_type, "types"),
            b.c.current_version_id.is_not(None),
            m.c.erased_position.is_(None),
            unarchived(b.c.belief),
        )
    )


def _date(cur: Any, log: EventLog, live: dict[UUID, _Live]) -> set[UUID]:
    """Set each live memory's time; return the edges its memories retracted."""
    dated = date_memories(cur, log, live, also=(Memory.EdgeRetracted,))
    for memory_id, time in dated.times.items():
        live[memory_id].time = time
    return {retraction.edge_id for retraction in dated.also}


def _nearest(schema: str, fused: bool, floored: bool) -> CompoundSelect[Any]:
    """For each live memory embedded at its current version with ``%(model)s``: its
    ``%(neighbours)s`` nearest newer ones (``newer``) and, for ``%(paired)s`` types,
    its ``%(shortlist)s`` nearest not joined to it by a live edge (``near``), with
    the full-text rank of each near one against it when ``fused``.

    The live memories' embeddings (and words) are gathered once, in a CTE; each
    memory then searches it exactly (nothing serves ``a.embedding <=>
    b.embedding``), within its type, scope and project: a scan of the tenant's
    live memories and a distance per memory of its kind, so a run costs about
    ``n * (n + g)`` for ``n`` live memories in groups of ``g``.
    """
    tables = tables_in(schema)
    given = (
        func.unnest(
            param("ids", ARRAY(Uuid)),
            param("versions", ARRAY(Uuid)),
            param("times", ARRAY(DateTime(timezone=True))),
            param("positions", ARRAY(BigInteger)),
        )
        .table_valued(
            column("memory_id", Uuid),
            column("version_id", Uuid),
            column("memory_time", DateTime(timezone=True)),
            column("position", BigInteger),
        )
        .render_derived(name="live")
    )
    e = tables["memory_embeddings"].alias("e")
    joined = e.join(
        given, and_(given.c.memory_id == e.c.memory_id, given.c.version_id == e.c.version_id)
    )
    links = tables["memory_links"].alias("l")
    # The memories each is joined to by an edge not retracted (either way: a link
    # row is written at each end), looked up once per memory, not once per pair.
    linked = func.array(
        select(links.c.linked_id)
        .where(
            links.c.memory_id == e.c.memory_id,
            links.c.edge_id != all_(param("retracted", ARRAY(Uuid))),
        )
        .scalar_subquery()
    )
    columns = [
        linked.label("linked"),
        e.c.memory_id,
        e.c.model_id,
        e.c.dimension,
        e.c.memory_type,
        e.c.scope,
        e.c.project,
        e.c.embedding,
        given.c.memory_time,
        given.c.position,
    ]
    if fused:
        c = tables["payloads"].alias("c")
        joined = joined.outerjoin(c, c.c.digest == e.c.content_digest)
        columns.append(_words(c).label("words"))
    emb = select(*columns).select_from(joined).where(e.c.model_id == param("model", Text))
    if fused:
        inner = emb.subquery("w")
        emb = select(*inner.c, _any_of(inner.c.words).label("query"))
    embedded = emb.cte("embedded")
    a, b = embedded.alias("a"), embedded.alias("b")
    distance = a.c.embedding.cosine_distance(b.c.embedding)
    floor = [cosine_similarity(a, b) >= param("floor", Float)] if floored else []
    later = tuple_(b.c.memory_time, b.c.position) > tuple_(a.c.memory_time, a.c.position)
    newer = (
        select(b.c.memory_id.label("other"), cosine_similarity(a, b).label("similarity"))
        .where(same_kind(a, b), later, *floor)
        .order_by(distance, b.c.memory_id)
        .limit(param("neighbours", Integer))
        .lateral("newer")
    )
    near = (
        select(
            b.c.memory_id.label("other"),
            cosine_similarity(a, b).label("similarity"),
            *([b.c.words] if fused else []),
        )
        .where(same_kind(a, b), b.c.memory_id != all_(a.c.linked), *floor)
        .order_by(distance, b.c.memory_id)
        .limit(param("shortlist", Integer))
        .lateral("near")
    )
    # Normalisation 1 divides by 1 + log(length), so long texts do not win on length;
    # ranked here, outside the search, only for the shortlist.
    text_rank: Any = (
        func.coalesce(func.ts_rank(near.c.words, a.c.query, inline(1)), inline(0.0))
        if fused
        else cast(null(), Float)
    )
    newer_rows = select(
        a.c.memory_id,
        newer.c.other,
        inline("newer").label("relation"),
        newer.c.similarity,
        cast(null(), Float).label("text_rank"),
    ).select_from(a.join(newer, true()))
    near_rows = (
        select(
            a.c.memory_id,
            near.c.other,
            inline("near").label("relation"),
            near.c.similarity,
            text_rank.label("text_rank"),
        )
        .select_from(a.join(near, true()))
        .where(any_of(a.c.memory_type, "paired"))
    )
    return union_all(newer_rows, near_rows)


def _words(c: Any) -> Any:
    """A memory's current text (payload ``c``) as a ``tsvector``.

    Content holding U+0000 (which PostgreSQL's text refuses) gets no words: it
    is ranked by cosine alone.
    """
    text = case(
        (c.c.content.op("LIKE", is_comparison=True)(param("nul", LargeBinary)), inline("")),
        else_=func.convert_from(c.c.content, inline("UTF8")),
    )
    return func.to_tsvector(cast(inline(TEXT_SEARCH_CONFIG), REGCONFIG), text)


def _any_of(words: Any) -> Any:
    """The query that matches any of ``words``: their text form with ``|`` between
    them (lexemes never hold a space, so ``' '`` only ever separates two); none for
    no words."""
    spelled = func.replace(cast(func.strip(words), Text), inline("' '"), inline("' | '"))
    return cast(func.nullif(spelled, inline("")), TSQUERY)


_REVIEWS = (
    "SELECT memory_id, related_memory_id, max(created_at) AS created_at,"
    " max(CASE WHEN status = 'dismissed' THEN created_at"
    " WHEN status IN ('applied', 'rejected') THEN decided_at END) AS reviewed_at"
    " FROM {schema}.retention_proposals WHERE memory_id = ANY(%(ids)s)"
    " GROUP BY memory_id, related_memory_id"
)
"""Per memory and related memory: the latest proposal, and the latest review."""


@dataclass
class _Proposed:
    """What proposals say about the live memories."""

    reviewed: dict[UUID, datetime]
    """The last review of each memory."""
    latest: dict[tuple[UUID, UUID | None], datetime]
    """The latest proposal about (memory, related memory or None)."""
    about: dict[UUID, datetime]
    """The latest proposal about each memory, whatever it relates it to."""


def _proposed(cur: Any, schema: str, ids: list[UUID]) -> _Proposed:
    """Read what proposals say about the memories ``ids``."""
    cur.execute(schema_query(_REVIEWS, schema), {"ids": ids})
    found = _Proposed({}, {}, {})
    for r in cur.fetchall():
        memory_id, created_at, reviewed_at = r["memory_id"], r["created_at"], r["reviewed_at"]
        found.latest[(memory_id, r["related_memory_id"])] = created_at
        found.about[memory_id] = max(created_at, found.about.get(memory_id, created_at))
        if reviewed_at is not None:
            found.reviewed[memory_id] = max(reviewed_at, found.reviewed.get(memory_id, reviewed_at))
    return found


def select_candidates(
    log: EventLog, tenant_id: UUID, *, now: datetime, settings: PassSettings, model_id: str
) -> PassCandidates:
    """Return the tenant's stale singles and candidate pairs at ``now`` (see the module's
    rules), ranked and capped, reading embeddings of ``model_id``.

    The reads run in one transaction; a memory not embedded at its current version
    with ``model_id`` is in no pair and nobody's neighbour, but can still be stale.
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(shaped_sql(_live_memories, schema), {"types": list(STALE_TYPES)})
        live = {
            r["memory_id"]: _Live(
                r["memory_id"],
                r["memory_type"],
                r["current_version_id"],
                r["position"],
                set(r["support"] or ()),
            )
            for r in cur.fetchall()
        }
        if not live:
            return PassCandidates([], [])
        retracted = _date(cur, log, live)
        ids = list(live)
        fused = settings.pair_fusion == "rrf"
        cur.execute(
            shaped_sql(_nearest, schema, fused, settings.pair_floor is not None),
            {
                "ids": ids,
                "versions": [m.version_id for m in live.values()],
                "times": [m.time for m in live.values()],
                "positions": [m.position for m in live.values()],
                "model": model_id,
                "neighbours": settings.neighbours,
                "shortlist": settings.pair_shortlist if fused else settings.pair_k,
                "paired": list(PAIRED_TYPES),
                "retracted": list(retracted),
                "nul": b"%\x00%",
                "floor": settings.pair_floor,
            },
        )
        rows = cur.fetchall()
        proposed = _proposed(cur, schema, ids)
    return _rank(live, rows, proposed, now=now, settings=settings)


def _time(memory: _Live) -> datetime:
    assert memory.time is not None  # set by _date for every live memory
    return memory.time


def _rank(
    live: dict[UUID, _Live],
    rows: list[Any],
    proposed: _Proposed,
    *,
    now: datetime,
    settings: PassSettings,
) -> PassCandidates:
    """Apply freshness, staleness, the anti-joins, the order and the caps."""
    newer: dict[UUID, list[Neighbour]] = defaultdict(list)
    near: dict[UUID, list[tuple[UUID, float, float]]] = defaultdict(list)
    for r in rows:
        other, similarity = r["other"], float(r["similarity"])
        if r["relation"] == "newer":
            newer[r["memory_id"]].append(Neighbour(other, similarity, _time(live[other])))
        else:
            near[r["memory_id"]].append((other, similarity, float(r["text_rank"] or 0.0)))
    content_fresh = {
        m: max([_time(memory), *(n.memory_time for n in newer[m])]) for m, memory in live.items()
    }
    freshness = {
        m: max(fresh, proposed.reviewed.get(m, fresh)) for m, fresh in content_fresh.items()
    }
    horizon = now - settings.stale_window

    singles = []
    for m, memory in live.items():
        last_proposal = proposed.about.get(m)
        if freshness[m] >= horizon or (last_proposal and last_proposal > content_fresh[m]):
            continue
        neighbours = sorted(newer[m], key=lambda n: (-n.similarity, str(n.memory_id)))
        singles.append(StaleSingle(m, memory.memory_type, freshness[m], _time(memory), neighbours))
    singles.sort(key=lambda s: (s.freshness, s.memory_time, str(s.memory_id)))

    scores: dict[tuple[UUID, UUID], tuple[float, float]] = {}
    for m, found in near.items():
        for other, similarity, score in _best(found, settings):
            key = _oriented(live[m], live[other])
            held = scores.get(key)
            scores[key] = (max(score, held[0]), similarity) if held else (score, similarity)
    pairs = []
    for (newer_id, older_id), (score, similarity) in scores.items():
        reopened_at = max(content_fresh[older_id], content_fresh[newer_id])
        about = [
            proposed.latest.get((older_id, None)),
            proposed.latest.get((older_id, newer_id)),
            proposed.latest.get((newer_id, older_id)),
        ]
        if any(t is not None and t > reopened_at for t in about):
            continue
        pairs.append(
            CandidatePair(
                older_id=older_id,
                newer_id=newer_id,
                similarity=similarity,
                older_stale=freshness[older_id] < horizon,
                older_time=_time(live[older_id]),
                newer_time=_time(live[newer_id]),
                score=score,
            )
        )
    pairs.sort(
        key=lambda p: (
            not p.older_stale,
            -p.score,
            -p.similarity,
            str(p.older_id),
            str(p.newer_id),
        )
    )
    return PassCandidates(singles[: settings.singles_cap], pairs[: settings.pairs_cap])


def _best(
    found: list[tuple[UUID, float, float]], settings: PassSettings
) -> list[tuple[UUID, float, float]]:
    """Return the ``pair_k`` best of one memory's shortlist as (other, similarity,
    score): by reciprocal rank fusion of the cosine and full-text ranks, or by cosine."""
    by_cosine = sorted(found, key=lambda f: (-f[1], str(f[0])))
    if settings.pair_fusion == "cosine":
        return [(o, s, s) for o, s, _ in by_cosine[: settings.pair_k]]
    by_text = sorted(found, key=lambda f: (-f[2], -f[1], str(f[0])))
    c = settings.rrf_constant
    fused = {o: 1 / (c + rank + 1) for rank, (o, _, _) in enumerate(by_cosine)}
    for rank, (o, _, _) in enumerate(by_text):
        fused[o] += 1 / (c + rank + 1)
    ranked = sorted(by_cosine, key=lambda f: (-fused[f[0]], -f[1], str(f[0])))
    return [(o, s, fused[o]) for o, s, _ in ranked[: settings.pair_k]]


def _oriented(a: _Live, b: _Live) -> tuple[UUID, UUID]:
    """Return (newer, older) of two memories, by time, then log position."""
    if (_time(a), a.position) > (_time(b), b.position):
        return a.memory_id, b.memory_id
    return b.memory_id, a.memory_id
