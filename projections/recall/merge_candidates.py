"""Consolidation's candidates: pairs of similar current memories that may merge.

The stored embeddings of the memories' *current* versions (an embedding of an
older version is not the memory's text any more) are compared pairwise
within one type, scope and project, ``event`` memories never; only pairs at
or above the floor come back. The comparison is exact: for ``n`` memories
in groups of ``g`` it costs about ``n * g`` distances, and consolidation asks
only about a cycle's survivors.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = ["similar_pairs"]


def similar_pairs(
    log: EventLog,
    tenant_id: UUID,
    memory_ids: Sequence[UUID],
    *,
    model_id: str,
    floor: float,
) -> dict[tuple[UUID, UUID], float]:
    """Return the cosine similarity of each pair of ``memory_ids`` (embedded with
    ``model_id`` at their current version) of one kind at or above ``floor``."""
    if len(memory_ids) < 2:
        return {}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "WITH e AS (SELECT e.memory_id, e.memory_type, e.scope, e.project, e.embedding"
                " FROM {schema}.memory_embeddings e JOIN {schema}.beliefs b"
                " ON b.tenant_id = e.tenant_id AND b.memory_id = e.memory_id"
                " AND b.current_version_id = e.version_id"
                " WHERE e.model_id = %(model)s AND e.memory_id = ANY(%(ids)s)"
                " AND e.memory_type <> 'event')"
                " SELECT a.memory_id AS a, b.memory_id AS b,"
                " 1 - (a.embedding <=> b.embedding) AS similarity"
                " FROM e a JOIN e b ON a.memory_type = b.memory_type AND a.scope = b.scope"
                " AND a.project IS NOT DISTINCT FROM b.project"
                " AND a.memory_id::text < b.memory_id::text"
                " WHERE 1 - (a.embedding <=> b.embedding) >= %(floor)s",
                log.datastore.schema,
            ),
            {"model": model_id, "ids": list(memory_ids), "floor": floor},
        )
        return {(row["a"], row["b"]): float(row["similarity"]) for row in cur}
