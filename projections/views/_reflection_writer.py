"""The reflections read model, kept in step with the log: recorded reflections
(``reflections``), their redactions, and the bytes of redacted text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.domain.reflection_rows import REFLECTION_RULES, RedactedReflection, ReflectionRow
from palimpsest.domain.removal_rows import ERASED_VERSION_RULE, ErasedVersion
from palimpsest.projections.store.arrays import UuidArray
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.views._removal_writer import (
    content_lost,
    delete_unheld_bytes,
    drawn_from_erased,
)

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store.table_writers import ReadModelRows


class ReflectionWriter(TableWriter):
    """``reflections``, and the bytes of redacted reflections."""

    rules = (*REFLECTION_RULES, ERASED_VERSION_RULE)
    reads = frozenset({ErasedVersion, RedactedReflection, ReflectionRow})

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Index the write's reflections; mark those it redacts and delete their text
        (unless a live observation or version holds the same bytes)."""
        for r in found.of(ReflectionRow):
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.reflections (reflection_id, scope, project, model,"
                    " content_digest, source_ids, created_at, position)"
                    " VALUES (%b, %b, %b, %b, %b, %b, %b, {position})",
                    schema,
                ),
                (
                    r.reflection_id,
                    r.scope,
                    r.project,
                    r.model,
                    r.content_digest,
                    list(r.source_ids),
                    r.created_at,
                ),
            )
        redacted = found.of(RedactedReflection)
        if redacted:
            curs.execute(
                schema_query(
                    "UPDATE {schema}.reflections SET redacted_position = {position}"
                    " WHERE reflection_id = ANY(%b::uuid[])",
                    schema,
                ),
                ([r.reflection_id for r in redacted],),
            )
            delete_unheld_bytes(curs, schema, (r.digest for r in redacted))

    def check(
        self, curs: Cursor[Any], schema: str, found: Dependencies, loaded: frozenset[UUID]
    ) -> None:
        """Refuse a write that erases a memory's content unless it loaded every
        unredacted reflection drawn from it.

        Raises:
            StaleReadError: the write must be built again from fresh aggregates.
        """
        lost = content_lost(found)
        if not lost:
            return
        curs.execute(
            schema_query(
                "SELECT reflection_id FROM {schema}.reflections"
                " WHERE source_ids && %b::uuid[] AND redacted_position IS NULL"
                " AND reflection_id <> ALL(%b::uuid[])",
                schema,
            ),
            (UuidArray(lost), UuidArray(loaded)),
        )
        drawn_from_erased([drawn for (drawn,) in curs.fetchall()])

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Do in memory what :meth:`write` does to the table."""
        reflections = rows["reflections"]
        for r in found.of(ReflectionRow):
            reflections[(r.reflection_id,)] = (
                r.scope,
                r.project,
                r.model,
                r.content_digest,
                list(r.source_ids),
                r.created_at,
                position,
                None,
            )
        for redacted in found.of(RedactedReflection):
            key = (redacted.reflection_id,)
            reflections[key] = (*reflections[key][:7], position)
