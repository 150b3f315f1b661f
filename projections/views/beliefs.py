"""Reads of what was written: observation metadata and content, memory versions.

Current belief (the projection) arrives with the revision watermark; these
reads show the recorded facts only, each rebuilt from the log, with content
joined from the payload store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from domain.errors import ContentErasedError, ContentExpiredError, NotFoundError
from domain.memory import Memory
from domain.observation import Observation
from projections.store.aggregates import event_positions, load_aggregate
from projections.store.eventlog import EventLog
from projections.store.migrations import EMBEDDINGS_TABLE, EVENTS_TABLE
from projections.store.tenancy import known_tenants, tenant_scope, tenant_transaction

__all__ = [
    "MemoryFilter",
    "ObservationContent",
    "current_belief",
    "erased_memories",
    "erasure_placeholder",
    "filter_clauses",
    "list_beliefs",
    "memory_versions",
    "observation_content",
    "observation_metadata",
    "revision_status",
    "revision_totals",
    "version_contents",
]


@dataclass(frozen=True)
class ObservationContent:
    """An observation's bytes and their media type."""

    content: bytes
    media_type: str


def _payloads(log: EventLog, tenant_id: UUID, digests: list[str]) -> dict[str, bytes]:
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT digest, content FROM "{log.datastore.schema}".payloads WHERE digest = ANY(%s)',
            (digests,),
        )
        return {r["digest"]: bytes(r["content"]) for r in cur}


def erasure_placeholder(decision_id: UUID) -> dict[str, Any]:
    """Return what a read shows in place of erased content: the erasure that took it
    (its receipt is ``GET /v1/erasures/{id}``)."""
    return {"id": str(decision_id), "receipt": f"/v1/erasures/{decision_id}"}


def _erased_sql(schema: str, alias: str) -> str:
    """SQL for the erasure decision whose write set ``{alias}.erased_position`` (the
    decision is recorded in the same write, so at the same position)."""
    return (
        f'(SELECT d.decision_id FROM "{schema}".decision_index d'
        f" WHERE d.position = {alias}.erased_position AND d.kind = 'erasure' LIMIT 1)"
    )


def erased_memories(log: EventLog, tenant_id: UUID, memory_ids: list[UUID]) -> dict[UUID, UUID]:
    """Return the erasure decision of each of ``memory_ids`` that is erased (now: an
    erasure reaches back into every past read)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f"SELECT m.memory_id, {_erased_sql(schema, 'm')} AS erased_by"
            f' FROM "{schema}".memory_index m'
            " WHERE m.memory_id = ANY(%s) AND m.erased_position IS NOT NULL",
            (memory_ids,),
        )
        return {row["memory_id"]: row["erased_by"] for row in cur}


def version_contents(log: EventLog, tenant_id: UUID, memory: Memory) -> dict[UUID, str | None]:
    """Return each version's content by version id: None once erased, or once its
    bytes are gone. An erased version's bytes may live on for another record with
    the same content; they are never this version's any more."""
    contents = _payloads(log, tenant_id, [v.content_digest for v in memory.live_versions])
    return {
        v.version_id: None
        if v.erased_by is not None or v.content_digest not in contents
        else contents[v.content_digest].decode("utf-8")
        for v in memory.versions
    }


def observation_metadata(log: EventLog, tenant_id: UUID, observation_id: UUID) -> dict[str, Any]:
    """Return an observation's recorded metadata (no content).

    Raises:
        NotFoundError: no such observation in the tenant.
    """
    obs = load_aggregate(log, tenant_id, observation_id, Observation, "observation")
    position, recorded_at = event_positions(log, tenant_id, obs.id)[1]
    return {
        "id": str(obs.id),
        "digest": obs.digest,
        "size_bytes": obs.size_bytes,
        "media_type": obs.media_type,
        "source": obs.source,
        "captured_at": obs.captured_at.isoformat(),
        "transient": obs.transient,
        "retention_deadline": obs.retention_deadline.isoformat(),
        "expired": obs.expired,
        "erased": None if obs.erased_by is None else erasure_placeholder(obs.erased_by),
        "principal_id": str(obs.principal_id),
        "position": position,
        "recorded_at": recorded_at.isoformat(),
        "milestones": _milestones(log, tenant_id, obs.id, recorded_at),
    }


def _milestones(
    log: EventLog, tenant_id: UUID, observation_id: UUID, captured_at: datetime
) -> dict[str, dict[str, str] | None]:
    """Return the observation's milestones, each ``{"at": time}`` or None (not reached).

    - captured: its event was recorded;
    - formed: a memory version cites it (the first such write);
    - indexed: every memory citing it has been embedded for recall at a revision
      at least as new as the write that cited it (the latest of those embeddings);
    - published: every memory citing it has published a revision at least as
      new as the write that cited it (the latest of those publishes).
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT (SELECT e.recorded_at FROM "{schema}"."{EVENTS_TABLE}" e'
            "  WHERE e.notification_id = min(l.position)) AS formed_at,"
            " bool_and(r.published >= l.position) AS all_published,"
            " max(r.published_at) AS published_at,"
            " bool_and(coalesce(x.revision, 0) >= l.position) AS all_indexed,"
            " max(x.embedded_at) AS indexed_at"
            f' FROM "{schema}".evidence_links l JOIN "{schema}".revisions r'
            " USING (tenant_id, memory_id)"
            f" LEFT JOIN LATERAL (SELECT max(e.revision) AS revision,"
            f' max(e.embedded_at) AS embedded_at FROM "{schema}".{EMBEDDINGS_TABLE} e'
            "  WHERE e.memory_id = l.memory_id) x ON true"
            " WHERE l.observation_id = %s",
            (observation_id,),
        )
        row = cur.fetchone()
    formed = row["formed_at"] if row else None
    published = row["published_at"] if row and row["all_published"] else None
    indexed = row["indexed_at"] if row and row["all_indexed"] else None
    return {
        "captured": {"at": captured_at.isoformat()},
        "formed": {"at": formed.isoformat()} if formed else None,
        "indexed": {"at": indexed.isoformat()} if indexed else None,
        "published": {"at": published.isoformat()} if published else None,
    }


def observation_content(
    log: EventLog, tenant_id: UUID, observation_id: UUID, *, now: datetime
) -> ObservationContent:
    """Return an observation's bytes.

    Raises:
        NotFoundError: no such observation in the tenant, or its bytes are gone.
        ContentErasedError: an erasure removed them.
        ContentExpiredError: the retention deadline has passed.
    """
    obs = load_aggregate(log, tenant_id, observation_id, Observation, "observation")
    if obs.erased_by is not None:
        msg = f"observation {observation_id}'s content was erased by decision {obs.erased_by}"
        raise ContentErasedError(msg, obs.erased_by)
    if obs.expired or obs.retention_deadline <= now:
        # Refused from the deadline on, even before the expiry drain deletes the bytes.
        msg = (
            f"observation {observation_id}'s content expired at its retention deadline "
            f"{obs.retention_deadline.isoformat()}"
        )
        raise ContentExpiredError(msg)
    data = _payloads(log, tenant_id, [obs.digest]).get(obs.digest)
    if data is None:
        msg = f"observation {observation_id} has no stored content"
        raise NotFoundError(msg)
    return ObservationContent(data, obs.media_type)


def memory_versions(log: EventLog, tenant_id: UUID, memory_id: UUID) -> dict[str, Any]:
    """Return a memory's recorded attributes and every version with its content.

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    memory = load_aggregate(log, tenant_id, memory_id, Memory, "memory")
    positions = event_positions(log, tenant_id, memory.id)
    contents = version_contents(log, tenant_id, memory)
    versions_by_event = _version_event_numbers(log, tenant_id, memory.id)
    versions = []
    for record in memory.versions:
        position, recorded_at = positions[versions_by_event[record.version_id]]
        versions.append(
            {
                "version_id": str(record.version_id),
                "number": record.position_in_memory,
                "content": contents[record.version_id],
                "erased": None
                if record.erased_by is None
                else erasure_placeholder(record.erased_by),
                "content_digest": record.content_digest,
                "size_bytes": record.size_bytes,
                "evidence": [e.as_event_value() for e in record.excerpts],
                "principal_id": str(record.principal_id),
                "position": position,
                "recorded_at": recorded_at.isoformat(),
            }
        )
    return {
        "id": str(memory.id),
        "type": memory.memory_type,
        "scope": memory.scope,
        "project": memory.project,
        "topic": memory.topic,
        "erased": None if memory.erased_by is None else erasure_placeholder(memory.erased_by),
        "versions": versions,
    }


def _version_event_numbers(log: EventLog, tenant_id: UUID, memory_id: UUID) -> dict[UUID, int]:
    with tenant_scope(tenant_id):
        events = log.events.get(memory_id)
        return {
            e.version_id: e.originator_version
            for e in events
            if isinstance(e, Memory.VersionRecorded)
        }


def _due_sql(schema: str) -> str:
    """SQL for the due retention deadlines of the observations a memory ``r`` cites."""
    return (
        "SELECT json_agg(json_build_object('observation_id', o.observation_id,"
        " 'deadline', o.deadline) ORDER BY o.deadline)"
        f' FROM "{schema}".evidence_links l JOIN "{schema}".observation_deadlines o'
        " USING (tenant_id, observation_id) WHERE l.memory_id = r.memory_id"
        " AND o.expired_position IS NULL AND o.erased_position IS NULL AND o.deadline <= %(now)s"
    )


def _revision_row(
    log: EventLog, tenant_id: UUID, memory_id: UUID, now: datetime
) -> dict[str, Any] | None:
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        # One statement, so the watermark, the belief and the deadlines come from one snapshot.
        cur.execute(
            f"SELECT r.requested, r.published, b.revision, b.belief, ({_due_sql(schema)}) AS due,"
            f" {_erased_sql(schema, 'm')} AS erased_by"
            f' FROM "{schema}".revisions r LEFT JOIN "{schema}".beliefs b'
            f' USING (tenant_id, memory_id) JOIN "{schema}".memory_index m'
            " USING (tenant_id, memory_id) WHERE r.memory_id = %(memory_id)s",
            {"memory_id": memory_id, "now": now},
        )
        row: dict[str, Any] | None = cur.fetchone()
        return row


def current_belief(
    log: EventLog,
    tenant_id: UUID,
    memory_id: UUID,
    *,
    now: Callable[[], datetime],
    wait_s: float = 0.0,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.02,
) -> dict[str, Any]:
    """Return the current belief, ``pending`` while revision has not caught up, or
    ``erased`` (with the erasure, never content) once the memory is erased.

    A belief is served only when its published revision has reached the
    requested one and no observation it cites is past its retention deadline
    without having expired yet; otherwise the answer is ``pending`` with both
    numbers, the due deadlines, and no belief content. With ``wait_s`` the
    call polls that long for the drain first (read-your-writes).

    Raises:
        NotFoundError: no such memory in the tenant.
    """
    deadline = clock() + wait_s
    while True:
        row = _revision_row(log, tenant_id, memory_id, now())
        if row is None:
            msg = f"memory {memory_id} not found"
            raise NotFoundError(msg)
        revision = {"requested": row["requested"], "published": row["published"]}
        if row["erased_by"] is not None:
            return {
                "status": "erased",
                "revision": revision,
                "erasure": erasure_placeholder(row["erased_by"]),
            }
        due = row["due"] or []
        if row["published"] >= row["requested"] and row["belief"] is not None and not due:
            return {"status": "current", "revision": revision, "belief": row["belief"]}
        if clock() >= deadline:
            return {"status": "pending", "revision": revision, "due": due}
        time.sleep(poll_s)


def filter_clauses(
    alias: str, memory_type: str | None, scope: str | None, project: str | None
) -> tuple[list[str], dict[str, Any]]:
    """Return the SQL conditions (on table ``alias``) and named parameters of the
    type, scope and project filters given (None means any)."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for column, value in (("memory_type", memory_type), ("scope", scope), ("project", project)):
        if value is not None:
            clauses.append(f"{alias}.{column} = %({column})s")
            params[column] = value
    return clauses, params


@dataclass(frozen=True)
class MemoryFilter:
    """Filters of a memory listing; ``None`` means any."""

    memory_type: str | None = None
    scope: str | None = None
    project: str | None = None
    status: str | None = None
    include_archived: bool = False
    """Forgotten and erased memories are left out unless asked for (then flagged by
    their belief, or shown as an erasure placeholder)."""


def list_beliefs(
    log: EventLog,
    tenant_id: UUID,
    where: MemoryFilter,
    *,
    limit: int,
    after: tuple[int, UUID] | None,
    now: datetime,
) -> tuple[list[dict[str, Any]], tuple[int, UUID] | None]:
    """List memories, newest first, each current (with its belief) or pending (without).

    ``after`` is the cursor: (creation position, id) of the last memory of the
    previous page; memories of one batch share a position, so the id breaks
    ties. Returns the page and the next cursor (None on the last page).
    """
    schema = log.datastore.schema
    # Current: caught up, computed, and no cited observation due for expiry.
    current = (
        "(r.published >= r.requested AND b.belief IS NOT NULL AND NOT EXISTS ("
        f' SELECT 1 FROM "{schema}".evidence_links l JOIN "{schema}".observation_deadlines o'
        " USING (tenant_id, observation_id) WHERE l.memory_id = r.memory_id"
        " AND o.expired_position IS NULL AND o.erased_position IS NULL"
        " AND o.deadline <= %(now)s))"
    )
    filters, params = filter_clauses("m", where.memory_type, where.scope, where.project)
    clauses = ["TRUE", *filters]
    params.update(now=now, limit=limit + 1)
    if not where.include_archived:
        # A pending memory's labels are not known yet: it is listed, without content.
        clauses.append("(b.belief IS NULL OR b.belief->'labels'->'archived' = 'null'::jsonb)")
        clauses.append("m.erased_position IS NULL")
    if where.status == "current":
        clauses.append(current)
    elif where.status == "pending":
        clauses.append(f"NOT {current}")
    if after is not None:
        clauses.append(
            "(m.position < %(after_p)s"
            " OR (m.position = %(after_p)s AND m.memory_id > %(after_id)s))"
        )
        params.update(after_p=after[0], after_id=after[1])
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            "SELECT m.memory_id, m.memory_type, m.scope, m.project, m.position, r.requested,"
            f" r.published, b.belief, {current} AS is_current,"
            f" {_erased_sql(schema, 'm')} AS erased_by"
            f' FROM "{schema}".memory_index m'
            f' JOIN "{schema}".revisions r USING (tenant_id, memory_id)'
            f' LEFT JOIN "{schema}".beliefs b USING (tenant_id, memory_id)'
            f" WHERE {' AND '.join(clauses)} ORDER BY m.position DESC, m.memory_id"
            " LIMIT %(limit)s",
            params,
        )
        rows = cur.fetchall()
    page = rows[:limit]
    items = []
    for row in page:
        revision = {"requested": row["requested"], "published": row["published"]}
        item: dict[str, Any] = {
            "id": str(row["memory_id"]),
            "type": row["memory_type"],
            "scope": row["scope"],
            "project": row["project"],
            "revision": revision,
        }
        if row["erased_by"] is not None:
            item.update(status="erased", erasure=erasure_placeholder(row["erased_by"]))
        elif row["is_current"]:
            item.update(status="current", belief=row["belief"])
        else:
            item.update(status="pending")
        items.append(item)
    next_cursor = None
    if len(rows) > limit:
        next_cursor = (page[-1]["position"], page[-1]["memory_id"])
    return items, next_cursor


def revision_status(log: EventLog, tenant_id: UUID) -> dict[str, Any]:
    """Return the tenant's revision figures: log head, dirty memories, oldest dirty age,
    memories published in the last minute, and memories the indexing drain has not
    handled at their published revision (recall may not find them yet)."""
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT (SELECT coalesce(max(notification_id), 0) FROM "{schema}"."{EVENTS_TABLE}")'
            " AS log_head, count(*) FILTER (WHERE published < requested) AS dirty,"
            " extract(epoch FROM clock_timestamp() - min(requested_at)"
            " FILTER (WHERE published < requested)) AS oldest_dirty_s,"
            " count(*) FILTER (WHERE published_at > clock_timestamp() - interval '60 s')"
            " AS published_last_minute, count(*) FILTER (WHERE indexed < published)"
            f' AS unindexed FROM "{schema}".revisions'
        )
        row = cur.fetchone()
    assert row is not None
    oldest = row["oldest_dirty_s"]
    return {
        "log_head": row["log_head"],
        "dirty_memories": row["dirty"],
        "oldest_dirty_age_s": round(float(oldest), 3) if oldest is not None else None,
        "drain_throughput_per_s": round(row["published_last_minute"] / 60.0, 3),
        "unindexed_memories": row["unindexed"],
    }


def revision_totals(log: EventLog) -> dict[str, float]:
    """Return the figures of :func:`revision_status` over every tenant: the highest log
    head, all dirty memories, the oldest dirty age and the summed throughput.

    Each tenant's figures are read under its own row-level security scope, as
    drains read them, so no role bypasses it; the cost grows with the number
    of tenants that have ever written a memory.
    """
    tenants = known_tenants(log.datastore)
    totals = {
        "log_head": 0.0,
        "dirty_memories": 0.0,
        "oldest_dirty_age_s": 0.0,
        "drain_throughput_per_s": 0.0,
        "unindexed_memories": 0.0,
    }
    for tenant_id in tenants:
        status = revision_status(log, tenant_id)
        totals["log_head"] = max(totals["log_head"], float(status["log_head"]))
        totals["dirty_memories"] += status["dirty_memories"]
        totals["oldest_dirty_age_s"] = max(
            totals["oldest_dirty_age_s"], status["oldest_dirty_age_s"] or 0.0
        )
        totals["drain_throughput_per_s"] += status["drain_throughput_per_s"]
        totals["unindexed_memories"] += status["unindexed_memories"]
    return totals
