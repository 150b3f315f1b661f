"""Tenant export: everything a tenant owns, as JSON lines, from one snapshot.

Lines, in order: a header; every event, oldest first, as the event feed shows
it (references and digests; token digests left out); every payload that
still exists (observation and version contents, by digest); the receipt of
every erasure; a trailer with the counts. Expired or erased bytes are gone
from the payload store, so they are not exported: the events that recorded
their removal, and the receipts, are.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from projections.store.eventlog import EventLog
from projections.store.migrations import EVENTS_TABLE
from projections.store.tenancy import set_tenant
from projections.views.receipts import erasure_receipt
from projections.views.timeline import describe_event

__all__ = ["EXPORT_FORMAT", "export_tenant"]

EXPORT_FORMAT = "palimpsest-export/1"
_FETCH = 1000


def export_tenant(log: EventLog, tenant_id: UUID, now: datetime) -> Iterator[dict[str, Any]]:
    """Yield the tenant's export, line by line, read in one consistent snapshot."""
    schema = log.datastore.schema
    with log.datastore.transaction(commit=False) as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        set_tenant(cur, tenant_id)
        yield {
            "kind": "header",
            "format": EXPORT_FORMAT,
            "tenant_id": str(tenant_id),
            "exported_at": now.isoformat(),
        }
        events = payloads = 0
        with cur.connection.cursor(name="tenant_export_events") as rows:
            rows.itersize = _FETCH
            rows.execute(
                "SELECT originator_id, originator_version, topic, state, notification_id,"
                f' recorded_at FROM "{schema}"."{EVENTS_TABLE}" ORDER BY notification_id'
            )
            for row in rows:
                event = log.mapper.to_domain_event(
                    StoredEvent(
                        row["originator_id"],
                        row["originator_version"],
                        row["topic"],
                        bytes(row["state"]),
                    )
                )
                events += 1
                yield {
                    "kind": "event",
                    **describe_event(event, row["notification_id"], row["recorded_at"]),
                }
        with cur.connection.cursor(name="tenant_export_payloads") as rows:
            rows.itersize = _FETCH
            rows.execute(
                f'SELECT digest, size_bytes, content FROM "{schema}".payloads ORDER BY digest'
            )
            for row in rows:
                payloads += 1
                yield {
                    "kind": "payload",
                    "digest": row["digest"],
                    "size_bytes": row["size_bytes"],
                    "content": bytes(row["content"]).decode("utf-8"),
                }
        cur.execute(
            f'SELECT decision_id FROM "{schema}".decision_index'
            " WHERE kind IN ('erasure', 'tenant_deletion') AND part_of IS NULL ORDER BY position"
        )
        erasures = [row["decision_id"] for row in cur.fetchall()]
        for erasure_id in erasures:
            yield {
                "kind": "erasure_receipt",
                "receipt": erasure_receipt(log, tenant_id, erasure_id),
            }
        yield {
            "kind": "end",
            "events": events,
            "payloads": payloads,
            "erasure_receipts": len(erasures),
        }
