"""The text of current versions, for reads that serve a belief with its content.

A belief names its current version, never its text; the text lives in the
payload store under the digest the version's ``VersionRecorded`` event
carries, decoded from the memory's version events (by the per-memory index:
the cost follows the memories' versions, not the log).

The belief was read in an earlier statement than the text. The text is read
in one statement with the memory's requested revision: if that moved, a
write that can change the belief (a new version, an erasure that deleted the
bytes) committed in between, and the caller must not serve the two together.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.memory import Memory
from projections.store.sql import schema_sql
from projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from projections.store.eventlog import EventLog

__all__ = ["VersionText", "version_events", "version_texts"]


class VersionText(NamedTuple):
    """A current version's text (None once its bytes are gone), with the memory's
    watermark as of the statement that read it."""

    content: str | None
    requested: int
    published: int


def version_events(
    log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]
) -> dict[UUID, Memory.VersionRecorded]:
    """Return the ``VersionRecorded`` event of each memory's version (``versions``: the
    version id by memory id), decoded by the log's mapper."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT originator_id, originator_version, topic, state"
                " FROM {schema}.palimpsest_events WHERE originator_id = ANY(%s) AND topic = %s",
                log.datastore.schema,
            ),
            (sorted(versions, key=str), Memory.VersionRecorded.TOPIC),
        )
        rows = cur.fetchall()
    found: dict[UUID, Memory.VersionRecorded] = {}
    for row in rows:
        event = log.mapper.to_domain_event(
            StoredEvent(
                row["originator_id"], row["originator_version"], row["topic"], bytes(row["state"])
            )
        )
        if (
            isinstance(event, Memory.VersionRecorded)
            and versions.get(event.originator_id) == event.version_id
        ):
            found[event.originator_id] = event
    return found


def _digests_of(log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]) -> dict[UUID, str]:
    """Return the content digest of each memory's version (``versions``: by memory)."""
    return {m: e.content_digest for m, e in version_events(log, tenant_id, versions).items()}


def version_texts(
    log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]
) -> dict[UUID, VersionText]:
    """Return the text of each memory's current version (``versions``: the version id
    by memory id), with the memory's watermark read in the same statement."""
    if not versions:
        return {}
    digests = _digests_of(log, tenant_id, versions)
    memory_ids = sorted(versions, key=str)
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT t.memory_id, r.requested, r.published, p.content"
                " FROM unnest(%s::uuid[], %s::text[]) AS t(memory_id, digest)"
                " JOIN {schema}.revisions r ON r.memory_id = t.memory_id"
                " LEFT JOIN {schema}.payloads p ON p.digest = t.digest",
                log.datastore.schema,
            ),
            (memory_ids, [digests.get(m) for m in memory_ids]),
        )
        rows = cur.fetchall()
    return {
        row["memory_id"]: VersionText(
            None if row["content"] is None else bytes(row["content"]).decode("utf-8"),
            int(row["requested"]),
            int(row["published"]),
        )
        for row in rows
    }
