"""Observation reads: an observation's recorded metadata and milestones, its bytes,
and the tenant's observations page by page.

The metadata is rebuilt from the log; the bytes come from the payload store
while the retention deadline has not passed and no erasure took them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self
from uuid import UUID

from pydantic import Field

from palimpsest.domain.errors import ContentErasedError, ContentExpiredError, NotFoundError
from palimpsest.domain.observation import Observation
from palimpsest.projections.store.aggregates import aggregates_at, event_positions, load_aggregate
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views._payloads import payload_contents
from palimpsest.projections.views.erasures import ErasurePlaceholder, erasure_placeholder
from palimpsest.projections.views.listing import ListingCursor
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "Milestone",
    "Milestones",
    "ObservationContent",
    "ObservationRecord",
    "ObservationSummary",
    "list_observations",
    "observation_content",
    "observation_metadata",
]


class Milestone(Record):
    """When an observation reached a milestone."""

    at: datetime


class Milestones(Record):
    """An observation's milestones, each reached at a time, or null (not yet).

    - captured: its event was recorded;
    - formed: a memory version cites it (the first such write);
    - indexed: every memory citing it has been embedded for recall at a revision
      at least as new as the write that cited it (the latest of those embeddings);
    - published: every memory citing it has published a revision at least as
      new as the write that cited it (the latest of those publishes).
    """

    captured: Milestone
    formed: Milestone | None
    indexed: Milestone | None
    published: Milestone | None


class ObservationSummary(Record):
    """An observation's recorded metadata (no content), as a listing shows it."""

    id: UUID
    digest: str
    size_bytes: int
    media_type: str
    source: str | None
    captured_at: datetime
    transient: bool
    retention_deadline: datetime
    expired: bool
    erased: ErasurePlaceholder | None = Field(
        default=None, description="The erasure that removed the content, if one did."
    )
    principal_id: UUID
    position: int
    recorded_at: datetime

    @classmethod
    def of(cls, obs: Observation, position: int, recorded_at: datetime, **more: Any) -> Self:
        """Return the aggregate's metadata, captured at ``position`` (``more``: the fields
        of a model that extends this one)."""
        return cls(
            id=obs.id,
            digest=obs.digest,
            size_bytes=obs.size_bytes,
            media_type=obs.media_type,
            source=obs.source,
            captured_at=obs.captured_at,
            transient=obs.transient,
            retention_deadline=obs.retention_deadline,
            expired=obs.expired,
            erased=None if obs.erased_by is None else erasure_placeholder(obs.erased_by),
            principal_id=obs.principal_id,
            position=position,
            recorded_at=recorded_at,
            **more,
        )


class ObservationRecord(ObservationSummary):
    """An observation's recorded metadata (no content) and its milestones."""

    milestones: Milestones = Field(
        description="captured, formed, indexed, published: each reached at a time, or null."
    )


@dataclass(frozen=True)
class ObservationContent:
    """An observation's bytes and their media type."""

    content: bytes
    media_type: str


def observation_metadata(log: EventLog, tenant_id: UUID, observation_id: UUID) -> ObservationRecord:
    """Return an observation's recorded metadata (no content).

    Raises:
        NotFoundError: no such observation in the tenant.
    """
    obs = load_aggregate(log, tenant_id, observation_id, Observation, "observation")
    position, recorded_at = event_positions(log, tenant_id, obs.id)[1]
    return ObservationRecord.of(
        obs, position, recorded_at, milestones=_milestones(log, tenant_id, obs.id, recorded_at)
    )


def list_observations(
    log: EventLog, tenant_id: UUID, *, limit: int, after: ListingCursor | None
) -> tuple[list[ObservationSummary], ListingCursor | None]:
    """List the tenant's observations, newest first (by capture position), with their
    metadata; expired and erased ones too, flagged. ``after`` is the last observation
    of the previous page. Returns the page and the next cursor (None on the last page).
    """
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        # The tenant's events, newest first, by its (tenant, position) index.
        cur.execute(
            schema_sql(
                "SELECT originator_id, notification_id, recorded_at"
                " FROM {schema}.palimpsest_events WHERE topic = %s AND notification_id < %s"
                " ORDER BY notification_id DESC LIMIT %s",
                log.datastore.schema,
            ),
            (Observation.Created.TOPIC, 2**62 if after is None else after.position, limit + 1),
        )
        rows = cur.fetchall()
        page = rows[:limit]
        found = aggregates_at(cur, log, tenant_id, [r["originator_id"] for r in page])
    items = [
        ObservationSummary.of(found[r["originator_id"]], r["notification_id"], r["recorded_at"])
        for r in page
        if isinstance(found.get(r["originator_id"]), Observation)
    ]
    next_cursor = None
    if len(rows) > limit:
        next_cursor = ListingCursor(page[-1]["notification_id"], page[-1]["originator_id"])
    return items, next_cursor


def _milestones(
    log: EventLog, tenant_id: UUID, observation_id: UUID, captured_at: datetime
) -> Milestones:
    """Return the observation's milestones (see :class:`Milestones`)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT (SELECT e.recorded_at FROM {schema}.palimpsest_events e"
                "  WHERE e.notification_id = min(l.position)) AS formed_at,"
                " bool_and(r.published >= l.position) AS all_published,"
                " max(r.published_at) AS published_at,"
                " bool_and(coalesce(x.revision, 0) >= l.position) AS all_indexed,"
                " max(x.embedded_at) AS indexed_at"
                " FROM {schema}.evidence_links l JOIN {schema}.revisions r"
                " USING (tenant_id, memory_id)"
                " LEFT JOIN LATERAL (SELECT max(e.revision) AS revision,"
                " max(e.embedded_at) AS embedded_at FROM {schema}.memory_embeddings e"
                "  WHERE e.memory_id = l.memory_id) x ON true"
                " WHERE l.observation_id = %s",
                log.datastore.schema,
            ),
            (observation_id,),
        )
        row = cur.fetchone()
    formed = row["formed_at"] if row else None
    published = row["published_at"] if row and row["all_published"] else None
    indexed = row["indexed_at"] if row and row["all_indexed"] else None
    return Milestones(
        captured=Milestone(at=captured_at),
        formed=Milestone(at=formed) if formed else None,
        indexed=Milestone(at=indexed) if indexed else None,
        published=Milestone(at=published) if published else None,
    )


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
    data = payload_contents(log, tenant_id, [obs.digest]).get(obs.digest)
    if data is None:
        msg = f"observation {observation_id} has no stored content"
        raise NotFoundError(msg)
    return ObservationContent(data, obs.media_type)
