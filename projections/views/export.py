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
from itertools import chain
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import set_tenant
from palimpsest.projections.views.receipts import Receipt, erasure_receipt
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.timeline import EventRecord, describe_row

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "EXPORT_FORMAT",
    "ExportEnd",
    "ExportHeader",
    "ExportLine",
    "ExportedEvent",
    "ExportedPayload",
    "ExportedReceipt",
    "export_tenant",
]

EXPORT_FORMAT = "palimpsest-export/1"
_FETCH = 1000


class ExportHeader(Record):
    """The first line: the format, the tenant, and when the export was read."""

    kind: Literal["header"] = "header"
    format: str
    tenant_id: UUID
    exported_at: datetime


class _EventKind(Record):
    kind: Literal["event"] = "event"


class ExportedEvent(EventRecord, _EventKind):
    """An event, as the event feed shows it (``kind`` first: the bases' fields come
    in reverse order)."""


class ExportedPayload(Record):
    """Content that still exists, by digest."""

    kind: Literal["payload"] = "payload"
    digest: str
    size_bytes: int
    content: str


class ExportedReceipt(Record):
    """The receipt of an erasure or a tenant deletion."""

    kind: Literal["erasure_receipt"] = "erasure_receipt"
    receipt: Receipt


class ExportEnd(Record):
    """The last line: how many of each kind of line came before."""

    kind: Literal["end"] = "end"
    events: int
    payloads: int
    erasure_receipts: int


ExportLine = ExportHeader | ExportedEvent | ExportedPayload | ExportedReceipt | ExportEnd
"""One line of an export."""


def export_tenant(log: EventLog, tenant_id: UUID, now: datetime) -> Iterator[ExportLine]:
    """Yield the tenant's export, line by line, read in one consistent snapshot."""
    schema = log.datastore.schema
    with log.datastore.transaction(commit=False) as cur:
        cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        set_tenant(cur, tenant_id)
        yield ExportHeader(format=EXPORT_FORMAT, tenant_id=tenant_id, exported_at=now)
        events = payloads = 0
        with cur.connection.cursor(name="tenant_export_events") as rows:
            rows.itersize = _FETCH
            rows.execute(
                schema_sql(
                    "SELECT originator_id, originator_version, topic, state, notification_id,"
                    " recorded_at, xmin::text AS tx FROM {schema}.palimpsest_events"
                    " ORDER BY notification_id",
                    schema,
                )
            )
            # One write's events are consecutive and share its transaction: they are
            # held until the write ends, whose last event's time is their visible_at.
            # An event that cannot be read goes out as the feed's flagged record, and
            # the export goes on to its end.
            write: list[Any] = []
            for row in chain(rows, [None]):
                if write and (row is None or row["tx"] != write[-1]["tx"]):
                    visible_at = write[-1]["recorded_at"]
                    for held in write:
                        described = describe_row(log, held, held["recorded_at"], visible_at)
                        # Validated as the feed's: only ``kind`` is added.
                        yield ExportedEvent.model_construct(**dict(described))
                    events += len(write)
                    write = []
                if row is not None:
                    write.append(row)
        with cur.connection.cursor(name="tenant_export_payloads") as rows:
            rows.itersize = _FETCH
            rows.execute(
                schema_sql(
                    "SELECT digest, size_bytes, content FROM {schema}.payloads ORDER BY digest",
                    schema,
                )
            )
            for row in rows:
                payloads += 1
                yield ExportedPayload(
                    digest=row["digest"],
                    size_bytes=row["size_bytes"],
                    content=bytes(row["content"]).decode("utf-8"),
                )
        cur.execute(
            schema_sql(
                "SELECT decision_id FROM {schema}.decision_index"
                " WHERE kind IN ('erasure', 'tenant_deletion') AND part_of IS NULL"
                " ORDER BY position",
                schema,
            )
        )
        erasures = [row["decision_id"] for row in cur.fetchall()]
        for erasure_id in erasures:
            yield ExportedReceipt(receipt=erasure_receipt(log, tenant_id, erasure_id))
        yield ExportEnd(events=events, payloads=payloads, erasure_receipts=len(erasures))
