"""Content from the payload store: observation bytes and version texts, by digest."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["payload_contents"]


def payload_contents(log: EventLog, tenant_id: UUID, digests: list[str]) -> dict[str, bytes]:
    """Return the stored bytes of each of ``digests`` that still exists (expired and
    erased bytes are gone)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT digest, content FROM {schema}.payloads WHERE digest = ANY(%s)",
                log.datastore.schema,
            ),
            (digests,),
        )
        return {r["digest"]: bytes(r["content"]) for r in cur}
