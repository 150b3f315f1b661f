"""The indexing drain: embed each memory's current version for recall.

Work is found in the database. Each memory's watermark row carries
``indexed``, the published revision the drain last handled; a memory is
due when ``indexed < published`` (a small partial index finds those) and
its revision has caught up. For each due memory whose current version has
no embedding with the active model, a pass reads the version's content,
embeds it outside any transaction (a model call can take seconds; the
library's idle-in-transaction timeout would kill a transaction held that
long), then, in one short transaction, writes the vectors and moves
``indexed`` up, only for memories whose requested revision is still the
one it read: a write in between (a new version, an erasure) makes the
vector stale, and the next pass redoes it. A due memory whose version is
already embedded (an edge or a label changed) only has ``indexed`` moved.

The same write keeps recall's words: the lexemes of the current version
(``memory_texts``, text search configuration
:data:`~palimpsest.projections.store.schema.TEXT_SEARCH_CONFIG`, and their inverted rows
in ``memory_lexemes``), written for each due memory whose current version has
none yet, with no model call.

The same write keeps each handled memory's time (``memory_texts.memory_time``, the
rule of :mod:`palimpsest.domain.memory_time`), which hybrid recall reads for the
months a query names: a reaffirm citing a newer capture moves it without a new version.

The same write finds the pairs recall marks as possible supersessions
(:mod:`palimpsest.projections.recall._conflict_marks`) for each due memory of a
paired type, last, under the tenant's pairing lock.

Each batch takes the tenant's newest due memories with its oldest
(:data:`NEWEST_SHARE`); those that went ahead of a backlog have their vectors inserted
again once it has passed them (:mod:`palimpsest.projections.recall._relinks`), or the
HNSW graph would bury them under it.

A model change: when a tenant has embeddings of another model, its
memories without one of the active model are made due again once, and the
other model's rows are dropped when nothing is left; recall answers from
what is indexed meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from palimpsest.domain.memory import Memory
from palimpsest.projections.recall._conflict_marks import write_marks
from palimpsest.projections.recall._relinks import relink_passed
from palimpsest.projections.recall._vectors import VectorValue, binary_vectors
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.settings import DEFAULT_CONFLICT_FLOOR, EmbeddingSettings
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.lexeme_counts import counting
from palimpsest.projections.store.schema import TEXT_SEARCH_CONFIG
from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.storable import storable_text
from palimpsest.projections.store.tenancy import known_tenants, tenant_transaction
from palimpsest.projections.views.candidates import PAIRED_TYPES
from palimpsest.projections.views.memory_times import date_memories
from palimpsest.projections.views.publications import publication_channel

__all__ = [
    "IndexReport",
    "index_due",
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
    marked: int = 0
    """Due memories whose current version was embedded already."""
    relinked: int = 0
    """Embeddings inserted again because a backlog passed them
    (:mod:`palimpsest.projections.recall._relinks`)."""


def unindexed_count(log: EventLog, tenant_id: UUID) -> int:
    """Return how many of the tenant's memories the indexing drain has not handled at
    their published revision (an upper bound on those recall cannot find yet)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT count(*) AS n FROM {schema}.revisions WHERE indexed < published",
                log.datastore.schema,
            )
        )
        row = cur.fetchone()
    return int(row["n"]) if row else 0


def index_due(log: EventLog, tenant_id: UUID) -> bool:
    """Whether any of the tenant's memories is due (as :func:`_due` finds them; one
    probe of the partial index)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT 1 FROM {schema}.revisions"
                " WHERE indexed < published AND published >= requested LIMIT 1",
                log.datastore.schema,
            )
        )
        return cur.fetchone() is not None


NEWEST_SHARE = 4
"""One in this many of a batch's memories are the tenant's most recently published,
the rest its oldest due: a backlog (an import) is indexed in order, and what is
written meanwhile, which an agent recalls next, waits one batch, not the backlog."""


def _newest(limit: int) -> int:
    """How many of a batch of ``limit`` are the newest due: ``limit // NEWEST_SHARE``,
    at least one."""
    return max(1, limit // NEWEST_SHARE)


def _due(log: EventLog, tenant_id: UUID, model_id: str, limit: int) -> list[dict[str, Any]]:
    """The due memories of a batch of ``limit``: the newest :func:`_newest` and the
    oldest, each once, oldest first."""
    newest = _newest(limit)
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "WITH due AS ((SELECT memory_id FROM {schema}.revisions"
                " WHERE indexed < published AND published >= requested"
                " ORDER BY published DESC LIMIT %s)"
                " UNION (SELECT memory_id FROM {schema}.revisions"
                " WHERE indexed < published AND published >= requested"
                " ORDER BY published LIMIT %s))"
                " SELECT r.memory_id, r.requested, r.published, b.current_version_id,"
                " m.memory_type, m.scope, m.project, m.erased_position, e.version_id AS embedded,"
                " t.version_id AS texted, b.belief->'support' AS support,"
                " extract(epoch FROM clock_timestamp() - r.published_at) AS waited"
                " FROM due JOIN {schema}.revisions r USING (memory_id)"
                " JOIN {schema}.beliefs b USING (tenant_id, memory_id)"
                " JOIN {schema}.memory_index m USING (tenant_id, memory_id)"
                " LEFT JOIN {schema}.memory_embeddings e ON e.tenant_id = r.tenant_id"
                " AND e.memory_id = r.memory_id AND e.model_id = %s"
                " LEFT JOIN {schema}.memory_texts t ON t.tenant_id = r.tenant_id"
                " AND t.memory_id = r.memory_id"
                " ORDER BY r.published",
                log.datastore.schema,
            ),
            (newest, limit - newest, model_id),
        )
        return [dict(row) for row in cur.fetchall()]


def _contents(log: EventLog, tenant_id: UUID, rows: list[dict[str, Any]]) -> dict[UUID, str]:
    """Return the content of each row's current version, by memory id, and set each
    row's ``content_digest`` (bytes that are gone are left out)."""
    memories = aggregates_of(log, tenant_id, [row["memory_id"] for row in rows])
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        digests: dict[UUID, str] = {}
        for row in rows:
            memory = memories.get(row["memory_id"])
            if isinstance(memory, Memory):
                for version in memory.live_versions:
                    if version.version_id == row["current_version_id"]:
                        digests[row["memory_id"]] = version.content_digest
        cur.execute(
            schema_query(
                "SELECT digest, content FROM {schema}.payloads WHERE digest = ANY(%s)",
                log.datastore.schema,
            ),
            (sorted(set(digests.values())),),
        )
        contents = {r["digest"]: bytes(r["content"]).decode("utf-8") for r in cur}
    for row in rows:
        row["content_digest"] = digests.get(row["memory_id"])
    return {m: contents[d] for m, d in digests.items() if d in contents}


@dataclass(frozen=True)
class _Current:
    """What a memory's time is read from: its current version and that version's active
    support (contribution ids, as the belief lists them)."""

    version_id: UUID
    support: AbstractSet[str]


def _times(log: EventLog, tenant_id: UUID, rows: list[dict[str, Any]]) -> dict[UUID, datetime]:
    """Return the time of each row's memory that has a current version and is not erased
    (:func:`palimpsest.projections.views.memory_times.date_memories`), by memory id."""
    live = {
        row["memory_id"]: _Current(row["current_version_id"], frozenset(row["support"] or ()))
        for row in rows
        if row["current_version_id"] is not None and row["erased_position"] is None
    }
    if not live:
        return {}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        return date_memories(cur, log, live).times


def _write_times(cur: Any, schema: str, times: dict[UUID, datetime]) -> None:
    """Set the time of each memory of ``times`` whose words are indexed."""
    cur.execute(
        schema_query(
            "UPDATE {schema}.memory_texts t SET memory_time = u.at"
            " FROM unnest(%b::uuid[], %b::timestamptz[]) AS u(m, at)"
            " WHERE t.memory_id = u.m AND t.memory_time IS DISTINCT FROM u.at",
            schema,
        ),
        (list(times), list(times.values())),
    )


def _write_texts(cur: Any, schema: str, rows: list[dict[str, Any]], texts: dict[UUID, str]) -> None:
    """Write the lexemes of each row's current version (``texts``, by memory id): its
    ``memory_texts`` document and its ``memory_lexemes`` rows."""
    cur.execute(
        schema_query(
            "INSERT INTO {schema}.memory_texts (memory_id, version_id, content_digest, revision,"
            " memory_type, scope, project, document) SELECT m, v, d, r, t, s, p,"
            " to_tsvector(%b::regconfig, c) FROM unnest(%b::uuid[], %b::uuid[], %b::text[],"
            " %b::int8[], %b::text[], %b::text[], %b::text[], %b::text[])"
            " AS u(m, v, d, r, t, s, p, c)"
            " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET version_id = excluded.version_id,"
            " content_digest = excluded.content_digest, revision = excluded.revision,"
            " memory_type = excluded.memory_type, scope = excluded.scope,"
            " project = excluded.project, document = excluded.document,"
            " indexed_at = clock_timestamp()",
            schema,
        ),
        (
            TEXT_SEARCH_CONFIG,
            [row["memory_id"] for row in rows],
            [row["current_version_id"] for row in rows],
            [row["content_digest"] for row in rows],
            [row["requested"] for row in rows],
            [row["memory_type"] for row in rows],
            [row["scope"] for row in rows],
            [row["project"] for row in rows],
            [storable_text(texts[row["memory_id"]]) for row in rows],
        ),
    )
    # The inverted lexemes, rewritten from the documents just written (text search
    # under row-level security reads these: see memory_lexemes).
    ids = [row["memory_id"] for row in rows]
    # Counted before they are rewritten: the old rows against the new documents.
    cur.execute(
        schema_query(
            counting(
                "WITH old AS (SELECT lexeme, memory_id FROM {schema}.memory_lexemes"
                " WHERE memory_id = ANY(%b::uuid[])),"
                " new AS (SELECT l.lexeme, t.memory_id FROM {schema}.memory_texts t,"
                " unnest(tsvector_to_array(t.document)) AS l(lexeme)"
                " WHERE t.memory_id = ANY(%b::uuid[])),"
                " changes AS (SELECT lexeme, -1 AS change FROM old"
                " UNION ALL SELECT '', -1 FROM old GROUP BY memory_id"
                " UNION ALL SELECT lexeme, 1 FROM new"
                " UNION ALL SELECT '', 1 FROM new GROUP BY memory_id)"
            ),
            schema,
        ),
        (ids, ids),
    )
    cur.execute(
        schema_query(
            "DELETE FROM {schema}.memory_lexemes WHERE memory_id = ANY(%b::uuid[])", schema
        ),
        (ids,),
    )
    cur.execute(
        schema_query(
            "INSERT INTO {schema}.memory_lexemes (lexeme, memory_id, occurrences)"
            " SELECT l.lexeme, t.memory_id, greatest(cardinality(l.positions), 1)"
            " FROM {schema}.memory_texts t, unnest(t.document) AS l"
            " WHERE t.memory_id = ANY(%b::uuid[])",
            schema,
        ),
        (ids,),
    )


def _write(
    log: EventLog,
    tenant_id: UUID,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    vectors: dict[UUID, list[float]],
    texts: dict[UUID, str] | None = None,
    conflict_floor: float = DEFAULT_CONFLICT_FLOOR,
    times: dict[UUID, datetime] | None = None,
) -> tuple[int, int]:
    """Write the vectors, the lexemes (``texts``: the content of the current versions
    that have none yet) and the memories' ``times``, and move ``indexed`` up, for the
    rows whose memory is still at the revision read; return (vectors written, rows
    handled)."""
    schema = log.datastore.schema
    # Derived from the log, as a publish is: a crash that loses it leaves the rows due.
    with tenant_transaction(log.datastore, tenant_id, commit=True, durable=False) as cur:
        # A write touching these memories raises their requested revision: it
        # waits for this transaction, or committed already and is seen here.
        cur.execute(
            schema_query(
                # In key order: two drains locking overlapping rows in different
                # orders deadlocked under fuzzing (issue 17).
                "SELECT memory_id, requested FROM {schema}.revisions"
                " WHERE memory_id = ANY(%s) ORDER BY memory_id FOR UPDATE",
                schema,
            ),
            ([row["memory_id"] for row in rows],),
        )
        still = {r["memory_id"]: r["requested"] for r in cur}
        fresh = [row for row in rows if still.get(row["memory_id"]) == row["requested"]]
        embedded = [row for row in fresh if row["memory_id"] in vectors]
        if embedded:
            binary_vectors(cur)
            cur.execute(
                schema_query(
                    "INSERT INTO {schema}.memory_embeddings (memory_id, model_id, dimension,"
                    " version_id, content_digest, revision, memory_type, scope, project,"
                    " embedding) SELECT m, %s, %s, v, d, r, t, s, p, e FROM unnest(%b::uuid[],"
                    " %b::uuid[], %b::text[], %b::int8[], %b::text[], %b::text[], %b::text[],"
                    " %b::vector[]) AS u(m, v, d, r, t, s, p, e)"
                    " ON CONFLICT (tenant_id, memory_id, model_id) DO UPDATE SET"
                    " dimension = excluded.dimension, version_id = excluded.version_id,"
                    " content_digest = excluded.content_digest, revision = excluded.revision,"
                    " memory_type = excluded.memory_type, scope = excluded.scope,"
                    " project = excluded.project, embedding = excluded.embedding,"
                    " embedded_at = clock_timestamp()",
                    schema,
                ),
                (
                    embedder.model_id,
                    embedder.dimension,
                    [row["memory_id"] for row in embedded],
                    [row["current_version_id"] for row in embedded],
                    [row["content_digest"] for row in embedded],
                    [row["requested"] for row in embedded],
                    [row["memory_type"] for row in embedded],
                    [row["scope"] for row in embedded],
                    [row["project"] for row in embedded],
                    [VectorValue(vectors[row["memory_id"]]) for row in embedded],
                ),
            )
        if fresh:
            cur.execute(
                schema_query(
                    "UPDATE {schema}.revisions r SET indexed = u.p"
                    " FROM unnest(%b::uuid[], %b::int8[]) AS u(m, p) WHERE r.memory_id = u.m",
                    schema,
                ),
                ([row["memory_id"] for row in fresh], [row["published"] for row in fresh]),
            )
        worded = [row for row in fresh if row["memory_id"] in (texts or {})]
        if worded:
            _write_texts(cur, schema, worded, texts or {})
        known = times or {}
        dated = {m: known[m] for row in fresh if (m := row["memory_id"]) in known}
        if dated:
            _write_times(cur, schema, dated)
        if embedded:
            # Delivered at commit: wakes writes waiting for their candidates, and
            # recalls waiting for their callers' writes.
            cur.execute("SELECT pg_notify(%s, %s)", (publication_channel(schema), str(tenant_id)))
        paired = [row for row in fresh if _pairable(row, vectors, texts or {})]
        pairing = {row["memory_id"] for row in paired}
        write_marks(
            cur,
            schema,
            model_id=embedder.model_id,
            dimension=embedder.dimension,
            paired=[
                (row["memory_id"], row["memory_type"], row["scope"], row["project"])
                for row in paired
            ],
            cleared=[
                row["memory_id"]
                for row in fresh
                if row["memory_type"] in PAIRED_TYPES and row["memory_id"] not in pairing
            ],
            conflict_floor=conflict_floor,
        )
        return len(embedded), len(fresh)


def _pairable(
    row: dict[str, Any], vectors: dict[UUID, list[float]], texts: dict[UUID, str]
) -> bool:
    """Whether a handled memory's pairs can be found now: a paired type, not erased,
    its current version embedded with the active model and its words indexed (this
    pass or before)."""
    version = row["current_version_id"]
    return (
        row["memory_type"] in PAIRED_TYPES
        and version is not None
        and row["erased_position"] is None
        and (row["memory_id"] in vectors or row["embedded"] == version)
        and (row["memory_id"] in texts or row["texted"] == version)
    )


def _write_split(
    log: EventLog,
    tenant_id: UUID,
    embedder: Embedder,
    rows: list[dict[str, Any]],
    vectors: dict[UUID, list[float]],
    writers: int,
    texts: dict[UUID, str] | None = None,
    conflict_floor: float = DEFAULT_CONFLICT_FLOOR,
    times: dict[UUID, datetime] | None = None,
) -> tuple[int, int]:
    """:func:`_write` in ``writers`` transactions at once, on disjoint rows.

    Inserting into the HNSW index is most of a write, and one backend does it
    on one core while the others idle: the embedding phase had them all. Two
    backends took the write from 0.70 to 0.45 ms per memory at 100,000
    memories (docs/benchmarks.md). Each part stands alone: its vectors and
    its ``indexed`` marks commit together.
    """
    parts = [part for part in (rows[i::writers] for i in range(writers)) if part]
    if len(parts) < 2:
        return _write(log, tenant_id, embedder, rows, vectors, texts, conflict_floor, times)
    with ThreadPoolExecutor(len(parts), thread_name_prefix="palimpsest-index") as pool:
        done = list(
            pool.map(
                lambda part: _write(
                    log, tenant_id, embedder, part, vectors, texts, conflict_floor, times
                ),
                parts,
            )
        )
    return sum(d[0] for d in done), sum(d[1] for d in done)


def _other_models(log: EventLog, tenant_id: UUID, model_id: str) -> None:
    """After a model change: make memories without an embedding of the active model
    due again (once), then, when every one has one, drop the other models' rows."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "SELECT EXISTS (SELECT 1 FROM {schema}.memory_embeddings"
                " WHERE model_id <> %s) AS other",
                schema,
            ),
            (model_id,),
        )
        row = cur.fetchone()
        if not (row and row["other"]):
            return
        cur.execute(
            schema_sql(
                "UPDATE {schema}.revisions r SET indexed = 0 FROM {schema}.beliefs b"
                " WHERE b.memory_id = r.memory_id AND b.current_version_id IS NOT NULL"
                " AND r.indexed > 0 AND NOT EXISTS (SELECT 1 FROM"
                " {schema}.memory_embeddings e WHERE e.memory_id = r.memory_id"
                " AND e.model_id = %s AND e.version_id = b.current_version_id)",
                schema,
            ),
            (model_id,),
        )
        if cur.rowcount > 0:
            return
        cur.execute(
            schema_sql(
                "SELECT EXISTS (SELECT 1 FROM {schema}.revisions WHERE indexed < published) AS due",
                schema,
            )
        )
        row = cur.fetchone()
        if row and not row["due"]:
            cur.execute(
                schema_sql("DELETE FROM {schema}.memory_embeddings WHERE model_id <> %s", schema),
                (model_id,),
            )


def index_pending(
    log: EventLog,
    embedder: Embedder,
    *,
    limit: int = 64,
    tenants: Callable[[], list[UUID]] | None = None,
    writers: int = 2,
    conflict_floor: float | None = None,
) -> IndexReport:
    """Handle up to ``limit`` due memories of each tenant, writing with ``writers``
    connections at once; return what was done. Recall's possible supersessions are
    paired at ``conflict_floor`` (None: ``PALIMPSEST_CONFLICT_FLOOR``, read once per
    call, as every process that indexes sees it)."""
    floor = EmbeddingSettings().conflict_floor if conflict_floor is None else conflict_floor
    embedded = stale = marked = relinked = 0
    for tenant_id in (tenants or (lambda: known_tenants(log.datastore)))():
        rows = _due(log, tenant_id, embedder.model_id, limit)
        if not rows:
            _other_models(log, tenant_id, embedder.model_id)
            continue
        wanted = [
            row
            for row in rows
            if row["current_version_id"] is not None
            and row["erased_position"] is None
            and (
                row["embedded"] != row["current_version_id"]
                or row["texted"] != row["current_version_id"]
            )
        ]
        contents = _contents(log, tenant_id, wanted) if wanted else {}
        ids = [
            row["memory_id"]
            for row in wanted
            if row["memory_id"] in contents and row["embedded"] != row["current_version_id"]
        ]
        vectors = dict(zip(ids, embedder.embed([contents[i] for i in ids]), strict=True))
        texts = {
            row["memory_id"]: contents[row["memory_id"]]
            for row in wanted
            if row["memory_id"] in contents and row["texted"] != row["current_version_id"]
        }
        times = _times(log, tenant_id, rows)
        written, handled = _write_split(
            log, tenant_id, embedder, rows, vectors, writers, texts, floor, times
        )
        embedded += written
        stale += len(rows) - handled
        marked += handled - written
        # A full batch has more due behind its oldest part (a backlog).
        full = len(rows) == limit
        oldest = limit - _newest(limit) if full else 0
        ended = not full or not index_due(log, tenant_id)
        relinked += relink_passed(log, tenant_id, embedder.model_id, rows, oldest, ended=ended)
    if embedded or stale:
        _log.info(
            "indexed",
            extra={"embedded": embedded, "stale": stale, "marked": marked, "relinked": relinked},
        )
    return IndexReport(embedded, stale, marked, relinked)


def reindex(
    log: EventLog,
    embedder: Embedder,
    *,
    limit: int = 256,
    report: Callable[[str], None] = lambda _: None,
) -> int:
    """Bring every tenant's recall index up to date with ``embedder``'s model, in
    passes, reporting progress; return how many memories were embedded.

    After a model change every memory is re-embedded; recall answers from the
    rows already made meanwhile, and the old model's rows go per tenant once it
    is done.
    """
    tenants = known_tenants(log.datastore)
    for tenant_id in tenants:
        _other_models(log, tenant_id, embedder.model_id)
    left = sum(unindexed_count(log, t) for t in tenants)
    report(f"reindex: {left:,} memories to check with {embedder.model_id}")
    started = time.monotonic()
    total = 0
    while True:
        done = index_pending(log, embedder, limit=limit, tenants=lambda: tenants)
        if not (done.embedded or done.marked):
            break
        total += done.embedded
        rate = total / max(time.monotonic() - started, 1e-9)
        report(f"reindex: {total:,} embedded, {rate:,.0f}/s")
    for tenant_id in tenants:
        _other_models(log, tenant_id, embedder.model_id)
    report(f"reindex: done, {total:,} embedded in {time.monotonic() - started:.1f} s")
    return total
