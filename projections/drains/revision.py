"""The revision drain: recompute dirty memories and publish their beliefs.

A memory is dirty while ``published < requested``. A drain claims a bounded
batch with ``FOR UPDATE SKIP LOCKED`` and a short lease (so other drainers
skip it and writers never wait on it), recomputes each belief with the
projection function, and publishes, in one transaction per memory, the
belief row and the requested revision it started from. Publishing is
monotonic: a slower drain can never move a belief or a published revision
backwards. A request that arrives during the drain raises ``requested``
above what is published, so the memory stays dirty and the newest
generation is recomputed next. Many requests for one memory coalesce into
one recompute. A killed drain loses only its lease, which expires.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from uuid import UUID

from domain.belief import MemoryFacts, project_belief
from projections.store.eventlog import EventLog
from projections.store.sql import schema_sql
from projections.store.tenancy import tenant_transaction
from projections.store.work_due import mark_published, marked_tenants
from projections.views.belief_facts import belief_document, facts_of
from projections.views.publications import publication_channel

__all__ = [
    "DrainReport",
    "LEASE_SECONDS",
    "drain_revisions",
    "drain_tenant",
]

_log = logging.getLogger(__name__)
LEASE_SECONDS = 10.0
"""How long a claim keeps other drains away; a killed drain delays its batch this long."""


@dataclass(frozen=True)
class DrainReport:
    """What one drain call did."""

    claimed: int
    published: int


def _note_clean(log: EventLog, tenant_id: UUID, seen: int) -> None:
    """Record that nothing was dirty once every mark up to ``seen`` had committed.

    A write that marks later has a larger position (positions follow commit
    order), so the tenant becomes eligible again. Memories that are dirty
    but leased by another drain keep the tenant eligible: if that drain
    dies, its lease expires and a later pass must find them.
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "SELECT 1 FROM {schema}.revisions WHERE published < requested LIMIT 1", schema
            )
        )
        if cur.fetchone() is None:
            cur.execute(
                schema_sql(
                    "UPDATE {schema}.revision_tenants SET drained_position ="
                    " greatest(drained_position, %s) WHERE tenant_id = %s",
                    schema,
                ),
                (seen, tenant_id),
            )


def _claim(log: EventLog, tenant_id: UUID, limit: int, lease_s: float) -> list[tuple[UUID, int]]:
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.revisions r SET claimed_until = clock_timestamp() "
                "+ make_interval(secs => %s) FROM ("
                "  SELECT memory_id FROM {schema}.revisions"
                "  WHERE published < requested"
                "  AND (claimed_until IS NULL OR claimed_until < clock_timestamp())"
                "  ORDER BY requested LIMIT %s FOR UPDATE SKIP LOCKED) c "
                "WHERE r.tenant_id = {schema}.current_tenant() AND r.memory_id = c.memory_id "
                "RETURNING r.memory_id, r.requested",
                schema,
            ),
            (lease_s, limit),
        )
        return [(row["memory_id"], row["requested"]) for row in cur]


def _publish(log: EventLog, tenant_id: UUID, facts: MemoryFacts, revision: int) -> None:
    _publish_all(log, tenant_id, [(facts, revision)])


def _publish_all(log: EventLog, tenant_id: UUID, computed: list[tuple[MemoryFacts, int]]) -> None:
    """Publish beliefs and watermarks of a batch in one transaction, never backwards."""
    if not computed:
        return
    beliefs = [(facts, project_belief(facts), revision) for facts, revision in computed]
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.beliefs (memory_id, revision, memory_type, scope, project,"
                " topic, current_version_id, grade, belief) SELECT * FROM unnest(%s::uuid[],"
                " %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::uuid[],"
                " %s::text[], %s::jsonb[]) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                " revision = excluded.revision, memory_type = excluded.memory_type,"
                " scope = excluded.scope, project = excluded.project, topic = excluded.topic,"
                " current_version_id = excluded.current_version_id, grade = excluded.grade,"
                " belief = excluded.belief WHERE beliefs.revision < excluded.revision",
                schema,
            ),
            (
                [f.memory_id for f, _, _ in beliefs],
                [r for _, _, r in beliefs],
                [f.memory_type for f, _, _ in beliefs],
                [f.scope for f, _, _ in beliefs],
                [f.project for f, _, _ in beliefs],
                [f.topic for f, _, _ in beliefs],
                [b.current_version_id for _, b, _ in beliefs],
                [b.grade for _, b, _ in beliefs],
                [json.dumps(belief_document(b)) for _, b, _ in beliefs],
            ),
        )
        cur.execute(
            schema_sql(
                "UPDATE {schema}.revisions r SET published = greatest(r.published, u.revision),"
                " claimed_until = NULL, published_at = clock_timestamp()"
                " FROM unnest(%s::uuid[], %s::bigint[]) AS u(id, revision)"
                " WHERE r.memory_id = u.id",
                schema,
            ),
            ([f.memory_id for f, _, _ in beliefs], [r for _, _, r in beliefs]),
        )
        mark_published(cur, schema, tenant_id)  # recall has new versions to index
        # Delivered at commit: wakes requests waiting for this tenant's revision.
        cur.execute("SELECT pg_notify(%s, %s)", (publication_channel(schema), str(tenant_id)))


def drain_tenant(
    log: EventLog, tenant_id: UUID, seen: int, *, limit: int = 100, lease_s: float = LEASE_SECONDS
) -> DrainReport:
    """Recompute and publish up to ``limit`` dirty memories of one tenant; with none
    to claim, record the tenant clean as of mark ``seen`` (read before calling)."""
    batch = _claim(log, tenant_id, limit, lease_s)
    if not batch:
        _note_clean(log, tenant_id, seen)
        return DrainReport(0, 0)
    facts = facts_of(log, tenant_id, [memory_id for memory_id, _ in batch])
    computed = []
    for memory_id, requested in batch:
        if memory_id not in facts:
            _log.error("dirty memory has no events", extra={"memory_id": str(memory_id)})
            continue
        computed.append((facts[memory_id], requested))
    _publish_all(log, tenant_id, computed)
    return DrainReport(len(batch), len(computed))


def drain_revisions(
    log: EventLog, *, limit: int = 100, lease_s: float = LEASE_SECONDS
) -> DrainReport:
    """Recompute and publish up to ``limit`` dirty memories per tenant marked dirty.

    Idempotent and safe to run concurrently: at-least-once delivery of a
    wake-up message only ever costs a recompute. A tenant's failure is
    raised (the drain loop and the workers run tenants one at a time with
    :func:`drain_tenant` instead).
    """
    claimed = published = 0
    for tenant_id, seen in marked_tenants(log.datastore, "revision").items():
        report = drain_tenant(log, tenant_id, seen, limit=limit, lease_s=lease_s)
        claimed += report.claimed
        published += report.published
    return DrainReport(claimed, published)
