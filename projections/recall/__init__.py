"""Recall: embedding memories and finding the ones nearest a query. Embeddings
only recall candidates; nothing here decides.

Modules:

- :mod:`palimpsest.projections.recall.caught_up`: Read your writes: whether recall sees
  every write up to a log position.
- :mod:`palimpsest.projections.recall._conflict_marks`: Possible supersessions: which
  memories a newer, similar one may have replaced.
- :mod:`palimpsest.projections.recall.embedders`: Embedders: texts in, unit vectors out,
  from a named model of known dimension.
- :mod:`palimpsest.projections.recall._filters`: Recall's filters as conditions on the
  searched rows, so each selects inside the search.
- :mod:`palimpsest.projections.recall._fusion`: Hybrid recall's fusion: one ranking from the
  vector and the text rankings.
- :mod:`palimpsest.projections.recall.index_erasure`: Recall's indexes of erased content,
  deleted in the erasing write's transaction.
- :mod:`palimpsest.projections.recall.indexing`: The indexing drain: embed each memory's
  current version for recall.
- :mod:`palimpsest.projections.recall.merge_candidates`: Consolidation's candidates: pairs
  of similar current memories that may merge.
- :mod:`palimpsest.projections.recall._named_months`: The months a query names: "in
  June", "on 1 February, 2023", "May 2023", "2023-05-08".
- :mod:`palimpsest.projections.recall.pass_candidates`: The forgetting pass's candidates:
  stale single memories, and pairs that may conflict.
- :mod:`palimpsest.projections.recall.query_vectors`: Query vectors: a recall's query
  embedded once per embedder, then remembered.
- :mod:`palimpsest.projections.recall.recalled`: What recall answers: each memory found,
  current or pending, and why it ranks there.
- :mod:`palimpsest.projections.recall._relevance`: How well a recalled memory matches,
  and whether it matches at all.
- :mod:`palimpsest.projections.recall.search`: Recall: the k current memories nearest a
  query, filtered inside the database.
- :mod:`palimpsest.projections.recall.settings`: Settings of embeddings, recall and
  contradiction candidates.
- :mod:`palimpsest.projections.recall._vectors`: pgvector values in psycopg's binary
  format, without touching the pool's adapters.
- :mod:`palimpsest.projections.recall._words`: Recall by words: the candidates of a
  full-text query over current versions.
"""

from __future__ import annotations

__all__ = [
    "caught_up",
    "embedders",
    "index_erasure",
    "indexing",
    "merge_candidates",
    "pass_candidates",
    "query_vectors",
    "recalled",
    "search",
    "settings",
]
