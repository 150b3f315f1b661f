"""Possible supersessions: which memories a newer, similar one may have replaced.

Agents ``remember`` a changed preference as a new memory far more often than they
revise the old one, and similarity alone ranks the stale claim first as often as
not. Recall therefore marks the older memory of an unsettled pair
(``possibly_superseded_by``) and ranks it below the newer one until the caller
settles the pair (docs/recall.md, "Possible supersessions").

A pair is two memories of one type (``decision``, ``preference`` or ``fact``:
:data:`~palimpsest.projections.views.candidates.PAIRED_TYPES`), one scope and one
project that are about the same thing. The conflict floor of potential
contradictions (cosine similarity 0.50, docs/candidates.md) finds only 43% of the
real updates of the knowledge-updates development split, so recall's pairs are
found by what the two share, measured there (docs/recall.md): their rare words
(:data:`WORD_OVERLAP` of their IDF-weighted words, IDF from the tenant's word
counts) at a similarity of at least :data:`LEAST_SIMILARITY`, or a similarity of
:data:`NEAR_DUPLICATE` on its own. A tenant holding fewer than
:data:`WORD_STATISTICS_FROM` memories has no word frequencies worth the name
("user" and "prefers" look as rare as "Lisbon"): there the conflict floor decides.
The newer is the one whose current version was indexed at the later revision
(``memory_texts.revision``: the words are indexed once per version, and a model
change leaves them alone).

The pairs are found when a memory is indexed, not when it is recalled: the
indexing drain calls :func:`write_marks` in the transaction that writes the
memory's vectors and words, for every paired memory it handles, among the
:data:`NEIGHBOURS` nearest memories of its kind, so recall reads pairs by key
(:func:`superseding`): those between its candidates, then the whole lists of the
memories it returns.

A pair stops marking once it is settled: a ``supersedes`` edge archives the older
one (the newer, when the edge points the other way); any other edge but
``conflicts_with`` (``extends``, ``derived_from``) joins the two on purpose; and a
``dismiss_conflict`` decision (``both_stand``, :func:`palimpsest.domain.decision.dismissal_key`)
says both stand. The newer one archived or erased marks nothing either.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from psycopg import sql

from palimpsest.domain.decision import DISMISS_CONFLICT
from palimpsest.projections.recall.settings import DEFAULT_CONFLICT_FLOOR
from palimpsest.projections.store.lexeme_counts import ANY_LEXEME
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.views.candidates import PAIRED_TYPES

if TYPE_CHECKING:
    from psycopg import Cursor

__all__ = [
    "EXACT_BELOW",
    "LEAST_SIMILARITY",
    "NEAR_DUPLICATE",
    "NEIGHBOURS",
    "WORD_OVERLAP",
    "WORD_STATISTICS_FROM",
    "conflicts_first",
    "superseding",
    "write_marks",
]

WORD_OVERLAP = 0.13
"""Two memories share enough of their words to be about one thing when the IDF weight of
the words both hold is at least this share of their weights (the shared weight over the
geometric mean of each one's: 1 for the same words)."""

LEAST_SIMILARITY = 0.20
"""...and their current versions are at least this similar (no shared name makes two
unrelated sentences one claim)."""

NEAR_DUPLICATE = 0.65
"""Two memories this similar are a pair whatever words they share (1% of the
development split's compatible preferences reach it, docs/candidates.md)."""

WORD_STATISTICS_FROM = 20
"""A tenant whose words are counted over fewer memories pairs by the conflict floor
alone."""

NEIGHBOURS = 40
"""A memory is paired among its this many nearest of its kind (at the time it is
indexed): a memory with more near-duplicates than this is marked by the nearest."""

EXACT_BELOW = 2000
"""A kind (tenant, type, scope, project) of at most this many embedded memories is
searched exactly for a memory's neighbours; a larger one walks the HNSW index, which
filters after the walk (pgvector 0.6), so a rare kind among many memories may miss
a neighbour there."""

_LOCK_CLASS = 0x5041_4C43  # "PALC": the first key of the advisory lock below
"""Two drains writing the pairs of two memories at once would each miss the other
(neither sees the other's uncommitted vector): pairs are written under a
transaction-scoped advisory lock per tenant, taken after the vectors are inserted, so
the later transaction's statement sees the earlier's committed vectors."""


def _near_statement(schema: str, dimension: int, exact: bool) -> sql.Composed:
    """The :data:`NEIGHBOURS` nearest memories of the same kind of each memory of
    ``%(ids)s`` (its vector of ``%(model)s``) at least ``%(least)s`` similar, with the
    revision each one's words were indexed at: ``a_id, a_revision, n_id, n_revision,
    similarity``."""
    vector = sql.SQL("::vector({})").format(sql.Literal(dimension))
    distance = sql.SQL("b.embedding{v} <=> a.embedding{v}").format(v=vector)
    return sql.SQL(
        "SELECT a.memory_id AS a_id, ta.revision AS a_revision, n.memory_id AS n_id,"
        " tn.revision AS n_revision, n.similarity"
        " FROM {schema}.memory_embeddings a"
        " JOIN {schema}.memory_texts ta ON ta.memory_id = a.memory_id"
        " CROSS JOIN LATERAL (SELECT b.memory_id, 1 - ({distance}) AS similarity"
        " FROM {schema}.memory_embeddings b WHERE b.model_id = a.model_id"
        " AND b.dimension = {dim} AND b.memory_type = a.memory_type AND b.scope = a.scope"
        " AND b.project IS NOT DISTINCT FROM a.project AND b.memory_id <> a.memory_id"
        # An expression no index serves forces the exact plan (as recall's search).
        " ORDER BY ({distance}){exact} LIMIT {neighbours}) AS n"
        " JOIN {schema}.memory_texts tn ON tn.memory_id = n.memory_id"
        " WHERE a.memory_id = ANY(%(ids)s) AND a.model_id = %(model)s AND a.dimension = {dim}"
        " AND n.similarity >= %(least)s"
    ).format(
        schema=sql.Identifier(schema),
        distance=distance,
        dim=sql.Literal(dimension),
        exact=sql.SQL(" + 0" if exact else ""),
        neighbours=sql.Literal(NEIGHBOURS),
    )


_WORDS = (
    "SELECT x.memory_id, x.lexeme, c.memories FROM {schema}.memory_lexemes x"
    " JOIN {schema}.lexeme_counts c USING (tenant_id, lexeme) WHERE x.memory_id = ANY(%(ids)s)"
)
"""Each word of the memories ``%(ids)s``, with how many of the tenant's memories hold it."""

_INSERT = (
    "INSERT INTO {schema}.conflict_marks (older_id, newer_id, similarity, overlap)"
    " SELECT * FROM unnest(%(older)s::uuid[], %(newer)s::uuid[], %(similarity)s::float8[],"
    " %(overlap)s::float8[])"
    # Two memories of one batch find each other twice, in the same orientation.
    " ON CONFLICT DO NOTHING"
)


def write_marks(
    cur: Cursor[Any],
    schema: str,
    *,
    model_id: str,
    dimension: int,
    paired: list[tuple[UUID, str, str, str | None]],
    cleared: list[UUID],
    conflict_floor: float = DEFAULT_CONFLICT_FLOOR,
) -> None:
    """Rewrite the pairs of the memories ``paired`` (id, type, scope, project: each
    embedded with ``model_id`` at its current version, its words indexed) and delete
    those of ``cleared`` (erased, or no longer of a paired type's current version).

    Runs in the indexing drain's write transaction, after its vectors and words, and
    takes the tenant's pairing lock (:data:`_LOCK_CLASS`) until that transaction ends.
    The nearest are found in PostgreSQL, the shared words weighed here: a statement
    joining every pair's words to each other's was planned as nested loops over its
    intermediate results, 0.13 s per memory for a batch of 64. Changes the
    transaction's planner settings: call it last.
    """
    ids = [p[0] for p in paired if p[1] in PAIRED_TYPES]
    gone = [*ids, *cleared]
    if not gone:
        return
    cur.execute(
        "SELECT pg_advisory_xact_lock(%s, hashtext(current_setting('palimpsest.tenant_id')))",
        (_LOCK_CLASS,),
    )
    cur.execute(
        sql.SQL(
            "DELETE FROM {schema}.conflict_marks"
            " WHERE older_id = ANY(%(ids)s) OR newer_id = ANY(%(ids)s)"
        ).format(schema=sql.Identifier(schema)),
        {"ids": gone},
    )
    if not ids:
        return
    docs = _worded_memories(cur, schema)
    small = docs < WORD_STATISTICS_FROM
    near = _nearest(cur, schema, model_id, dimension, paired, min(LEAST_SIMILARITY, conflict_floor))
    weights = {} if small else _word_weights(cur, schema, near, docs)
    rows: list[tuple[UUID, UUID, float, float | None]] = []
    for a_id, a_revision, n_id, n_revision, similarity in near:
        overlap = None if small else _overlap(weights.get(a_id, {}), weights.get(n_id, {}))
        if small:
            keep = similarity >= conflict_floor
        else:
            words = overlap is not None and overlap >= WORD_OVERLAP
            keep = similarity >= NEAR_DUPLICATE or (similarity >= LEAST_SIMILARITY and words)
        if keep:
            older, newer = (a_id, n_id) if (a_revision, a_id) < (n_revision, n_id) else (n_id, a_id)
            rows.append((older, newer, similarity, overlap))
    if rows:
        older_ids, newer_ids, similarities, overlaps = zip(*rows, strict=True)
        cur.execute(
            schema_query(_INSERT, schema),
            {
                "older": list(older_ids),
                "newer": list(newer_ids),
                "similarity": list(similarities),
                "overlap": list(overlaps),
            },
        )


def _nearest(
    cur: Cursor[Any],
    schema: str,
    model_id: str,
    dimension: int,
    paired: list[tuple[UUID, str, str, str | None]],
    least: float,
) -> list[tuple[UUID, int, UUID, int, float]]:
    """The nearest of each memory of ``paired`` (:func:`_near_statement`): exactly in the
    kinds of at most :data:`EXACT_BELOW` memories, on the index in the others."""
    kinds = {(t, s, p) for _, t, s, p in paired if t in PAIRED_TYPES}
    small: list[UUID] = []
    large: list[UUID] = []
    for kind in kinds:
        members = [m for m, t, s, p in paired if (t, s, p) == kind]
        (small if _kind_size(cur, schema, model_id, kind) <= EXACT_BELOW else large).extend(members)
    near: list[tuple[UUID, int, UUID, int, float]] = []
    for chosen, exact in ((small, True), (large, False)):
        if not chosen:
            continue
        scan = "on" if exact else "off"
        # Planned for its memories each time: the exact and the index plan depend on
        # the kinds' sizes, which a generic plan (psycopg prepares a statement run
        # five times) would not see.
        cur.execute(
            "SELECT set_config('hnsw.ef_search', '400', true),"
            " set_config('enable_seqscan', %s, true), set_config('enable_sort', %s, true),"
            " set_config('plan_cache_mode', 'force_custom_plan', true)",
            (scan, scan),
        )
        cur.execute(
            _near_statement(schema, dimension, exact),
            {"ids": chosen, "model": model_id, "least": least},
        )
        near += [
            (r["a_id"], r["a_revision"], r["n_id"], r["n_revision"], float(r["similarity"]))
            for r in cur.fetchall()
        ]
    return near


def _word_weights(
    cur: Cursor[Any], schema: str, near: list[tuple[UUID, int, UUID, int, float]], docs: int
) -> dict[UUID, dict[str, float]]:
    """The weight of each word of the memories of ``near`` (both sides), by memory:
    ``ln(docs / memories holding the word)``, the tenant's inverse document frequency."""
    involved = sorted({m for a, _, n, _, _ in near for m in (a, n)})
    if not involved:
        return {}
    cur.execute(schema_query(_WORDS, schema), {"ids": involved})
    weights: dict[UUID, dict[str, float]] = {}
    for row in cur.fetchall():
        held = max(int(row["memories"]), 1)
        weights.setdefault(row["memory_id"], {})[row["lexeme"]] = math.log(max(docs, held) / held)
    return weights


def _overlap(a: dict[str, float], b: dict[str, float]) -> float | None:
    """The share of their words' weight two memories hold in common: the weight of the
    words both hold over the geometric mean of each one's (None: either has none)."""
    total = math.sqrt(sum(a.values()) * sum(b.values()))
    if total <= 0:
        return None
    return sum(weight for word, weight in a.items() if word in b) / total


def _worded_memories(cur: Cursor[Any], schema: str) -> int:
    """How many of the tenant's memories hold any word (``lexeme_counts``)."""
    cur.execute(
        sql.SQL("SELECT memories FROM {schema}.lexeme_counts WHERE lexeme = %s").format(
            schema=sql.Identifier(schema)
        ),
        (ANY_LEXEME,),
    )
    row = cur.fetchone()
    return int(row["memories"]) if row else 0


def _kind_size(
    cur: Cursor[Any], schema: str, model_id: str, kind: tuple[str, str, str | None]
) -> int:
    """How many embeddings of ``model_id`` a kind holds, counting no further than
    :data:`EXACT_BELOW` + 1 (a btree range of the filters' index)."""
    memory_type, scope, project = kind
    cur.execute(
        sql.SQL(
            "SELECT count(*) AS n FROM (SELECT 1 FROM {schema}.memory_embeddings"
            " WHERE model_id = %s AND memory_type = %s AND scope = %s"
            " AND project IS NOT DISTINCT FROM %s LIMIT %s) AS s"
        ).format(schema=sql.Identifier(schema)),
        (model_id, memory_type, scope, project, EXACT_BELOW + 1),
    )
    row = cur.fetchone()
    return int(row["n"]) if row else 0


_DISMISSAL_KEY = (
    "'sha256:' || encode(sha256(convert_to('{{\"kind\":\"" + DISMISS_CONFLICT + '",'
    '"params":{{}},"subject":"memories:\''
    ' || least(k.older_id::text COLLATE "C", k.newer_id::text)'
    " || ',' || greatest(k.older_id::text COLLATE \"C\", k.newer_id::text) || '\"}}',"
    " 'UTF8')), 'hex')"
)
""":func:`palimpsest.domain.decision.dismissal_key` of the pair ``k`` in SQL: the
SHA-256 of the decision's canonical JSON (kind, subject, no parameters), the subject
naming the two ids in text order (``"C"``: byte order, as Python compares them).
tests/projections/recall/test_conflict_marks.py holds the two equal."""


_SUPERSEDING = (
    "SELECT older_id, array_agg(newer_id ORDER BY revision DESC, newer_id) AS newer"
    " FROM (SELECT k.older_id, k.newer_id,"
    " (SELECT t.revision FROM {schema}.memory_texts t WHERE t.memory_id = k.newer_id)"
    " AS revision,"
    " (SELECT b.belief -> 'labels' -> 'archived' FROM {schema}.beliefs b"
    " WHERE b.memory_id = k.newer_id) AS archived,"
    " EXISTS (SELECT 1 FROM {schema}.memory_links l WHERE l.memory_id = k.older_id"
    " AND l.linked_id = k.newer_id AND l.kind <> 'conflicts_with') AS linked,"
    " EXISTS (SELECT 1 FROM {schema}.decision_index d WHERE d.logical_key = "
    + _DISMISSAL_KEY
    + " AND d.kind = '"
    + DISMISS_CONFLICT
    + "') AS dismissed"
    " FROM unnest(%(ids)s::uuid[]) AS i(memory_id)"
    " CROSS JOIN LATERAL (SELECT older_id, newer_id FROM {schema}.conflict_marks"
    " WHERE older_id = i.memory_id"
    " AND (%(among)s::uuid[] IS NULL OR newer_id = ANY(%(among)s::uuid[]))"
    " OFFSET 0) AS k OFFSET 0) AS p"
    " WHERE revision IS NOT NULL AND archived = 'null'::jsonb AND NOT linked AND NOT dismissed"
    " GROUP BY older_id"
)
"""The unsettled pairs of the memories ``%(ids)s`` as the older, newest first: the newer
one neither archived (its belief) nor erased (its words are gone with its version), no
edge but ``conflicts_with`` between the two, no ``dismiss_conflict`` decision about
them. ``%(among)s`` not null: only the pairs whose newer one is among it, chosen
before any of the checks runs."""


def superseding(
    cur: Cursor[Any], schema: str, ids: list[UUID], *, among: list[UUID] | None = None
) -> dict[UUID, list[UUID]]:
    """Return, for each of the memories ``ids`` that has any, the newer memories that
    may supersede it, newest first: its stored pairs that nobody settled; with
    ``among``, only those among it.

    Settled: a ``supersedes`` edge (either way: one of the two is archived), any other
    edge but ``conflicts_with`` joining them, or a ``dismiss_conflict`` decision about
    the pair, found in ``decision_index`` by its logical key
    (:func:`palimpsest.domain.decision.dismissal_key`). One prepared statement on
    ``cur``, each row found by key: every pair of the memories asked about (with
    ``among``, those whose newer one is among it), each with its checks as
    subqueries (OFFSET 0 keeps them so: joined, the planner read every pair, text
    and belief of the tenant when its statistics were few). The checks are most of
    its time (two primary-key lookups a pair, about 2 microseconds each): recall
    asks first about the pairs between its candidates only (a median 137 of the
    1,334 pairs its two searches' candidates hold, on the 2,000 templated facts of
    tests/benchmarks/agent_ops.py), then for the whole lists of what it returns.
    """
    if not ids:
        return {}
    cur.execute(schema_query(_SUPERSEDING, schema), {"ids": ids, "among": among}, prepare=True)
    return {row["older_id"]: list(row["newer"]) for row in cur.fetchall()}


_T = TypeVar("_T")


def conflicts_first(
    ordered: list[_T],
    id_of: Callable[[_T], UUID],
    newer_of: Callable[[_T], Iterable[UUID]],
    yields: Callable[[_T, _T], bool],
) -> list[_T]:
    """Return ``ordered`` (best first) with each memory placed right below the newer
    memories among them that may supersede it (``newer_of``) and that it ``yields`` to:
    such a newer one takes the place of the best of the memories it may supersede,
    which follow it. Until the caller settles a conflict, time decides between its
    two sides."""
    by_id = {id_of(item): item for item in ordered}
    place = {memory_id: i for i, memory_id in enumerate(by_id)}
    placed: set[UUID] = set()
    out: list[_T] = []

    def put(item: _T) -> None:
        memory_id = id_of(item)
        if memory_id in placed:
            return
        placed.add(memory_id)  # before its newer ones: the pairs are oriented, no cycle
        newer = sorted(
            (n for n in newer_of(item) if n in by_id and yields(item, by_id[n])),
            key=place.__getitem__,
        )
        for newer_id in newer:
            put(by_id[newer_id])
        out.append(item)

    for item in ordered:
        put(item)
    return out
