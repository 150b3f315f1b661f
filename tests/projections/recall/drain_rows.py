"""Memories written straight into the text index by tests: the indexing drain's rows
(the attributes the search reads), and documents written by the drain's own writer in
a transaction rolled back afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID, uuid4

from palimpsest.projections.recall.indexing import _write_texts
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import SET_TENANT_SQL


def drain_rows(ids: list[UUID]) -> list[dict[str, Any]]:
    """Return the indexing drain's rows for memories ``ids``: current facts of scope
    ``user``, each with a version and digest of its own."""
    return [
        {
            "memory_id": memory_id,
            "current_version_id": uuid4(),
            "content_digest": f"d{memory_id}",
            "requested": 1,
            "memory_type": "fact",
            "scope": "user",
            "project": None,
        }
        for memory_id in ids
    ]


@contextmanager
def written_texts(
    runtime: Runtime, tenant_id: UUID, documents: list[str]
) -> Iterator[tuple[Any, list[UUID]]]:
    """Write ``documents`` as memories of the tenant's text index, in a transaction
    rolled back on exit; yield its cursor (the tenant's) and the memories' ids, in
    order."""
    ids = [uuid4() for _ in documents]
    with (
        runtime.log.datastore.get_connection() as conn,
        conn.transaction(force_rollback=True),
        conn.cursor() as cur,
    ):
        cur.execute(SET_TENANT_SQL, (str(tenant_id),))
        _write_texts(
            cur, runtime.database.schema, drain_rows(ids), dict(zip(ids, documents, strict=True))
        )
        yield cur, ids
