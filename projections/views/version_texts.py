"""The text of current versions, for reads that serve a belief with its content.

A belief names its current version, never its text; the text lives in the
payload store under the digest the version's ``VersionRecorded`` event
carries: taken from this process's copy of the memory when it holds one, else
decoded from the memory's version events, newest first (by the per-memory
index: the cost follows the memories' versions, not the log).

The belief was read in an earlier statement than the text. The text is read
in one statement with the memory's requested revision: if that moved, a
write that can change the belief (a new version, an erasure that deleted the
bytes) committed in between, and the caller must not serve the two together.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from palimpsest.domain.memory import Memory
from palimpsest.projections.store.aggregate_cache import aggregate_cache
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.projections.store.eventlog import EventLog

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
        return _version_events_in(cur, log, versions)


def _version_events_in(
    cur: Cursor[Any], log: EventLog, versions: dict[UUID, UUID]
) -> dict[UUID, Memory.VersionRecorded]:
    """:func:`version_events`, in the transaction of ``cur``."""
    _select_version_events(cur, log, list(versions))
    return _decoded_version_events(log, cur, versions)


def _select_version_events(cur: Cursor[Any], log: EventLog, memory_ids: list[UUID]) -> None:
    """Execute the query of the memories' ``VersionRecorded`` events (every version: the
    event names its version in its state only), each memory's newest first, for
    :func:`_decoded_version_events`."""
    cur.execute(
        schema_sql(
            "SELECT originator_id, originator_version, topic, state"
            " FROM {schema}.palimpsest_events WHERE originator_id = ANY(%s) AND topic = %s"
            " ORDER BY originator_id, originator_version DESC",
            log.datastore.schema,
        ),
        (sorted(memory_ids, key=str), Memory.VersionRecorded.TOPIC),
    )


def _decoded_version_events(
    log: EventLog, rows: Iterable[Any], versions: dict[UUID, UUID]
) -> dict[UUID, Memory.VersionRecorded]:
    """Return the event of each memory's version in ``rows`` (of
    :func:`_select_version_events`), decoded by the log's mapper.

    The current version is nearly always a memory's newest, and a memory revised for
    months has hundreds of versions: rows are decoded newest first, a memory's older
    ones skipped once its version is found, and iteration stops once every version
    is (``rows`` may be the cursor itself: the rows after that are never built)."""
    found: dict[UUID, Memory.VersionRecorded] = {}
    for row in rows:
        if row["originator_id"] in found:
            continue
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
            if len(found) == len(versions):
                break
    return found


def version_texts(
    log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]
) -> dict[UUID, VersionText]:
    """Return the text of each memory's current version (``versions``: the version id
    by memory id), with the memory's watermark read in the same statement."""
    if not versions:
        return {}
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        return _version_texts_in(cur, log, tenant_id, versions)


def _known_digests(log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]) -> dict[UUID, str]:
    """Return the content digest of each version in ``versions`` that this process's
    copy of its memory holds (:mod:`palimpsest.projections.store.aggregate_cache`: the memories
    it last loaded or recorded). A version's digest never changes; its bytes are still
    read from the payload store, so an erasure that deleted them is seen."""
    cache = aggregate_cache(log)
    found: dict[UUID, str] = {}
    for memory_id, version_id in versions.items():
        memory = cache.peek(tenant_id, memory_id)
        for version in reversed(getattr(memory, "versions", ())):
            if version.version_id == version_id:
                found[memory_id] = version.content_digest
                break
    return found


def _version_texts_in(
    cur: Cursor[Any], log: EventLog, tenant_id: UUID, versions: dict[UUID, UUID]
) -> dict[UUID, VersionText]:
    """:func:`version_texts`, in the transaction of ``cur``. Each statement of a READ
    COMMITTED transaction takes its own snapshot, so the watermark read with the text
    is as fresh as in a transaction of its own. The digests come from this process's
    copies of the memories where it holds them, else from the version events."""
    if not versions:
        return {}
    digests = _known_digests(log, tenant_id, versions)
    unknown = {m: v for m, v in versions.items() if m not in digests}
    if unknown:
        events = _version_events_in(cur, log, unknown)
        digests |= {m: e.content_digest for m, e in events.items()}
    memory_ids = sorted(versions, key=str)
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
