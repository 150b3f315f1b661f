"""Version reads: a memory's recorded attributes and every version, with its content.

This is the record, not the current belief: each version as it was
recorded, rebuilt from the log, its content joined from the payload store
(``null`` once erased, or once its bytes are gone).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from pydantic import Field

from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.memory import Memory, VersionRecord
from palimpsest.projections.store.aggregates import event_positions, load_aggregate
from palimpsest.projections.store.tenancy import tenant_scope, tenant_transaction
from palimpsest.projections.views._payloads import payload_contents
from palimpsest.projections.views._write_times import write_ends
from palimpsest.projections.views.erasures import ErasurePlaceholder, erasure_placeholder
from palimpsest.projections.views.listing import MemoryAttributes
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "MemoryVersions",
    "RecordedMemory",
    "RecordedVersion",
    "memory_versions",
    "version_contents",
]


class RecordedMemory(MemoryAttributes):
    """A memory's recorded attributes, and the erasure that removed it, if one did."""

    erased: ErasurePlaceholder | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )

    @classmethod
    def of(cls, memory: Memory, **more: Any) -> Self:
        """Return the aggregate's attributes (``more``: the fields of a model that
        extends this one)."""
        return cls(
            id=memory.id,
            memory_type=memory.memory_type,
            scope=memory.scope,
            project=memory.project,
            topic=memory.topic,
            erased=None if memory.erased_by is None else erasure_placeholder(memory.erased_by),
            **more,
        )


class RecordedVersion(Record):
    """One recorded version of a memory, with its content and the excerpts it was
    formed from (by reference and digest)."""

    version_id: UUID
    number: int
    content: str | None
    erased: ErasurePlaceholder | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    content_digest: str
    size_bytes: int
    excerpts: list[Excerpt] = Field(serialization_alias="evidence")
    principal_id: UUID
    position: int
    recorded_at: datetime
    visible_at: datetime = Field(
        description="When the write that recorded the version became visible (the time of "
        "its last event): an as-of read at this time, or at recorded_at, reads this version."
    )

    @classmethod
    def of(
        cls,
        record: VersionRecord,
        content: str | None,
        position: int,
        recorded_at: datetime,
        visible_at: datetime,
        **more: Any,
    ) -> Self:
        """Return a version of the aggregate, with its content, recorded at ``position``
        by a write visible from ``visible_at`` (``more``: the fields of a model that
        extends this one)."""
        return cls(
            version_id=record.version_id,
            number=record.position_in_memory,
            content=content,
            erased=None if record.erased_by is None else erasure_placeholder(record.erased_by),
            content_digest=record.content_digest,
            size_bytes=record.size_bytes,
            excerpts=list(record.excerpts),
            principal_id=record.principal_id,
            position=position,
            recorded_at=recorded_at,
            visible_at=visible_at,
            **more,
        )


class MemoryVersions(RecordedMemory):
    """A memory's recorded attributes and all its versions, oldest first."""

    versions: list[RecordedVersion]


def version_contents(log: EventLog, tenant_id: UUID, memory: Memory) -> dict[UUID, str | None]:
    """Return each version's content by version id: None once erased, or once its
    bytes are gone. An erased version's bytes may live on for another record with
    the same content; they are never this version's any more."""
    contents = payload_contents(log, tenant_id, [v.content_digest for v in memory.live_versions])
    return {
        v.version_id: None
        if v.erased_by is not None or v.content_digest not in contents
        else contents[v.content_digest].decode("utf-8")
        for v in memory.versions
    }


def memory_versions(log: EventLog, tenant_id: UUID, memory_id: UUID) -> MemoryVersions:
    """Return a memory's recorded attributes and every version with its content.

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    memory = load_aggregate(log, tenant_id, memory_id, Memory, "memory")
    positions = event_positions(log, tenant_id, memory.id)
    contents = version_contents(log, tenant_id, memory)
    versions_by_event = _version_event_numbers(log, tenant_id, memory.id)
    recorded = {v: positions[n] for v, n in versions_by_event.items()}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        ends = write_ends(cur, log.datastore.schema, [p for p, _ in recorded.values()])
    return MemoryVersions.of(
        memory,
        versions=[
            RecordedVersion.of(
                record,
                contents[record.version_id],
                *recorded[record.version_id],
                ends[recorded[record.version_id][0]].visible_at,
            )
            for record in memory.versions
        ],
    )


def _version_event_numbers(log: EventLog, tenant_id: UUID, memory_id: UUID) -> dict[UUID, int]:
    with tenant_scope(tenant_id):
        events = log.events.get(memory_id)
        return {
            e.version_id: e.originator_version
            for e in events
            if isinstance(e, Memory.VersionRecorded)
        }
