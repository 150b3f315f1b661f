"""Reflections, read apart from memories: only when a caller asks for them.

The ``reflections`` read model finds them (newest first, by scope and
project, or by the memories they were drawn from); their text comes from
the payload store. A redacted reflection (a source was erased) is never
returned: its text is gone and nothing stands in for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import Field

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["MAX_REFLECTIONS_LISTED", "ReflectionRecord", "list_reflections"]

MAX_REFLECTIONS_LISTED = 50
"""The most reflections one read returns."""


class ReflectionRecord(Record):
    """An insight a model drew from several memories: not a memory, never ranked."""

    id: UUID
    scope: str
    project: str | None
    content: str
    model: str = Field(description="The model that drew it.")
    source_ids: list[UUID] = Field(description="The memories it was drawn from.")
    created_at: datetime


def list_reflections(
    log: EventLog,
    tenant_id: UUID,
    *,
    scope: str | None = None,
    project: str | None = None,
    drawn_from: Sequence[UUID] | None = None,
    limit: int = MAX_REFLECTIONS_LISTED,
) -> list[ReflectionRecord]:
    """Return the tenant's unredacted reflections, newest first: of ``scope`` and
    ``project`` when given, and drawn from any of ``drawn_from`` when given."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT r.reflection_id, r.scope, r.project, r.model, r.source_ids,"
                " r.created_at, p.content FROM {schema}.reflections r"
                " JOIN {schema}.payloads p ON p.digest = r.content_digest"
                " WHERE r.redacted_position IS NULL"
                " AND (%(scope)s::text IS NULL OR r.scope = %(scope)s)"
                " AND (%(project)s::text IS NULL OR r.project = %(project)s)"
                " AND (%(drawn)s::uuid[] IS NULL OR r.source_ids && %(drawn)s::uuid[])"
                " ORDER BY r.position DESC, r.reflection_id LIMIT %(limit)s",
                log.datastore.schema,
            ),
            {
                "scope": scope,
                "project": project,
                "drawn": None if drawn_from is None else list(drawn_from),
                "limit": limit,
            },
        )
        rows = cur.fetchall()
    return [
        ReflectionRecord(
            id=row["reflection_id"],
            scope=row["scope"],
            project=row["project"],
            content=bytes(row["content"]).decode("utf-8"),
            model=row["model"],
            source_ids=list(row["source_ids"]),
            created_at=row["created_at"],
        )
        for row in rows
    ]
