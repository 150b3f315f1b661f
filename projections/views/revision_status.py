"""How far revision has caught up: per tenant, and over all tenants for metrics.

A tenant's callers see their own watermark; the service's metrics see every
tenant's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import Field

from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.store.work_due import busy_tenants
from palimpsest.projections.views.record import Record

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "MAX_LISTED",
    "RevisionStatus",
    "UnprojectableMemory",
    "revision_status",
    "revision_totals",
]


MAX_LISTED = 100
"""Quarantined memories :func:`revision_status` lists (it counts them all)."""


class UnprojectableMemory(Record):
    """A memory the revision drain quarantined: it cannot be projected at ``revision``."""

    memory_id: UUID
    revision: int
    error: str


class RevisionStatus(Record):
    """How far revision has caught up in a tenant."""

    log_head: int
    dirty_memories: int = Field(
        description="Memories pending revision that drains will publish (not the "
        "unprojectable ones)."
    )
    unprojectable_memories: int = Field(
        default=0,
        description="Memories the drain quarantined: they cannot be projected at their "
        "requested revision, and answer `unprojectable` until a later write or a rebuild.",
    )
    unprojectable: list[UnprojectableMemory] = Field(
        default_factory=list,
        description=f"The quarantined memories, with their errors (at most {MAX_LISTED}).",
    )
    unindexed_memories: int = Field(
        description="Memories recall's index has not caught up with (embedding pending)."
    )
    oldest_dirty_age_s: float | None
    drain_throughput_per_s: float


def revision_status(log: EventLog, tenant_id: UUID) -> RevisionStatus:
    """Return the tenant's revision figures: log head, dirty memories, oldest dirty age,
    memories published in the last minute, memories the indexing drain has not
    handled at their published revision (recall may not find them yet), and the
    quarantined (unprojectable) memories."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT (SELECT coalesce(max(notification_id), 0)"
                " FROM {schema}.palimpsest_events) AS log_head,"
                " count(*) FILTER (WHERE published < requested"
                "  AND unprojectable_at IS DISTINCT FROM requested) AS dirty,"
                " extract(epoch FROM clock_timestamp() - min(requested_at) FILTER ("
                "  WHERE published < requested AND unprojectable_at IS DISTINCT FROM requested))"
                " AS oldest_dirty_s,"
                " count(*) FILTER (WHERE published_at > clock_timestamp() - interval '60 s')"
                " AS published_last_minute, count(*) FILTER (WHERE indexed < published)"
                " AS unindexed FROM {schema}.revisions",
                log.datastore.schema,
            )
        )
        row = cur.fetchone()
        assert row is not None
        cur.execute(
            schema_sql(
                "SELECT memory_id, requested, unprojectable_error,"
                " count(*) OVER () AS quarantined FROM {schema}.revisions"
                " WHERE unprojectable_at = requested ORDER BY requested_at LIMIT %s",
                log.datastore.schema,
            ),
            (MAX_LISTED,),
        )
        quarantined = cur.fetchall()
    oldest = row["oldest_dirty_s"]
    return RevisionStatus(
        log_head=row["log_head"],
        dirty_memories=row["dirty"],
        oldest_dirty_age_s=round(float(oldest), 3) if oldest is not None else None,
        drain_throughput_per_s=round(row["published_last_minute"] / 60.0, 3),
        unindexed_memories=row["unindexed"],
        unprojectable_memories=quarantined[0]["quarantined"] if quarantined else 0,
        unprojectable=[
            UnprojectableMemory(
                memory_id=q["memory_id"], revision=q["requested"], error=q["unprojectable_error"]
            )
            for q in quarantined
        ],
    )


def revision_totals(log: EventLog) -> dict[str, float]:
    """Return the figures of :func:`revision_status` over every tenant: the highest log
    head, all dirty memories, the oldest dirty age and the summed throughput.

    Each tenant's figures are read under its own row-level security scope, as
    drains read them, so no role bypasses it. Only tenants with work due or
    beliefs published in the last minute are read (the others' figures are
    all zero: :func:`palimpsest.projections.store.work_due.busy_tenants`), so an idle
    store answers in one query whatever its number of tenants.
    """
    head, busy = busy_tenants(log.datastore)
    totals = {
        "log_head": float(head),
        "dirty_memories": 0.0,
        "oldest_dirty_age_s": 0.0,
        "drain_throughput_per_s": 0.0,
        "unindexed_memories": 0.0,
        "unprojectable_memories": 0.0,
    }
    for tenant_id in busy:
        status = revision_status(log, tenant_id)
        totals["log_head"] = max(totals["log_head"], float(status.log_head))
        totals["dirty_memories"] += status.dirty_memories
        totals["oldest_dirty_age_s"] = max(
            totals["oldest_dirty_age_s"], status.oldest_dirty_age_s or 0.0
        )
        totals["drain_throughput_per_s"] += status.drain_throughput_per_s
        totals["unindexed_memories"] += status.unindexed_memories
        totals["unprojectable_memories"] += status.unprojectable_memories
    return totals
