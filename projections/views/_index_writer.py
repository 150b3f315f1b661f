"""The memory and decision indexes, kept in step with the log: a created memory's
row in ``memory_index`` (erased once erased), a decision's in ``decision_index``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from palimpsest.domain.index_rows import INDEX_RULES, ErasedMemory, IndexedDecision, IndexedMemory
from palimpsest.projections.store.arrays import TextArray, UuidArray
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store.sql import Chain
    from palimpsest.projections.store.table_writers import ReadModelRows


class IndexWriter(TableWriter):
    """``memory_index`` and ``decision_index``."""

    rules = INDEX_RULES
    reads = frozenset({ErasedMemory, IndexedDecision, IndexedMemory})

    def chain(self, chain: Chain, schema: str, found: Dependencies) -> None:
        """Insert the rows of created memories and recorded decisions."""
        created = found.of(IndexedMemory)
        if created:
            chain.add(
                schema_query(
                    "INSERT INTO {schema}.memory_index"
                    " (memory_id, memory_type, scope, project, topic, position)"
                    " SELECT i, ty, sc, pr, tp, {position}"
                    " FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::text[], %b::text[])"
                    " AS t(i, ty, sc, pr, tp)",
                    schema,
                ),
                (
                    UuidArray(m.memory_id for m in created),
                    TextArray(m.memory_type for m in created),
                    TextArray(m.scope for m in created),
                    TextArray(m.project for m in created),
                    TextArray(m.topic for m in created),
                ),
            )
        decisions = found.of(IndexedDecision)
        if decisions:
            chain.add(
                schema_query(
                    "INSERT INTO {schema}.decision_index"
                    " (decision_id, kind, logical_key, position, part_of)"
                    " SELECT d, k, l, {position}, p"
                    " FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::uuid[]) AS t(d, k, l, p)",
                    schema,
                ),
                (
                    UuidArray(d.decision_id for d in decisions),
                    TextArray(d.kind for d in decisions),
                    TextArray(d.logical_key for d in decisions),
                    UuidArray(d.part_of for d in decisions),
                ),
            )

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Mark the erased memories' rows with the write's position."""
        erased = found.of(ErasedMemory)
        if erased:
            curs.execute(
                schema_query(
                    "UPDATE {schema}.memory_index SET erased_position = {position}"
                    " WHERE memory_id = ANY(%b::uuid[])",
                    schema,
                ),
                ([e.memory_id for e in erased],),
            )

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Do in memory what :meth:`chain` and :meth:`write` do to the tables."""
        index = rows["memory_index"]
        for m in found.of(IndexedMemory):
            index[(m.memory_id,)] = (m.memory_type, m.scope, m.project, m.topic, position, None)
        for d in found.of(IndexedDecision):
            rows["decision_index"][(d.decision_id,)] = (d.kind, d.logical_key, position, d.part_of)
        for e in found.of(ErasedMemory):
            index[(e.memory_id,)] = (*index[(e.memory_id,)][:5], position)
