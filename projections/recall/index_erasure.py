"""Recall's indexes of erased content, deleted in the erasing write's transaction.

Recall's vectors and words are derived from a version's content: when a write
erases that content, they go in the same transaction, so no search ever finds
what was erased. :class:`IndexErasure` is the table writer that does it
(:mod:`palimpsest.projections.store.table_writers`; the runtime hands it to every
event log).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.domain.removal_rows import ERASED_VERSION_RULE, ErasedVersion
from palimpsest.projections.store.lexeme_counts import counting
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies

__all__ = ["IndexErasure"]


class IndexErasure(TableWriter):
    """Deletes erased versions' embeddings, texts and words (and their counts)."""

    rules = (ERASED_VERSION_RULE,)
    reads = frozenset({ErasedVersion})

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Delete what recall indexed of the versions the write erases."""
        versions = [e.version_id for e in found.of(ErasedVersion)]
        if not versions:
            return
        curs.execute(
            schema_query(
                "DELETE FROM {schema}.{embeddings} WHERE version_id = ANY(%b::uuid[])", schema
            ),
            (versions,),
        )
        curs.execute(
            schema_query(
                counting(
                    "WITH gone AS (DELETE FROM {schema}.memory_texts"
                    " WHERE version_id = ANY(%b::uuid[]) RETURNING memory_id),"
                    " words AS (DELETE FROM {schema}.memory_lexemes x USING gone"
                    " WHERE x.memory_id = gone.memory_id RETURNING x.lexeme, x.memory_id),"
                    " changes AS (SELECT lexeme, -1 AS change FROM words"
                    " UNION ALL SELECT '', -1 FROM words GROUP BY memory_id)"
                ),
                schema,
            ),
            (versions,),
        )
