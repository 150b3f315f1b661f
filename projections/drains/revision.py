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

Its transactions do not wait for the disk (``durable=False`` in
:func:`palimpsest.projections.store.tenancy.tenant_transaction`): what they write is
derived from the log, whose writes do wait. A crash of PostgreSQL that loses
the last publishes leaves those memories dirty (``requested`` was durable),
so reads answer ``pending`` and the drains publish them again; a belief is
never served ahead of its revision. Each write no longer queues for the
disk behind the publishes it caused.

A memory the drain cannot project (its events make the projection raise,
such as a contribution's trust outside [0, 1] written below the API, one of
its events cannot be decoded or applied (:mod:`palimpsest.projections.store.unreadable`),
or PostgreSQL refuses its row) is quarantined at its requested revision: the error is
recorded on its ``revisions`` row, logged once, and the memory answers
``unprojectable`` instead of being retried every sweep; the rest of its
batch, its tenant and other tenants go on. A later write to the memory
raises ``requested`` and ends the quarantine (the drain tries again), as
does ``palimpsest rebuild``. Text PostgreSQL cannot store (U+0000) is not
a reason: it is replaced (:mod:`palimpsest.projections.store.storable`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial
from uuid import UUID

from eventsourcing.persistence import DataError

from palimpsest.domain.belief import MemoryFacts, project_belief
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.arrays import Int8Array, TextArray, UuidArray
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.rollbacks import retry_rolled_back
from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.storable import storable
from palimpsest.projections.store.tenancy import (
    PLAN_FOR_TENANT_SQL,
    queued_transaction,
    tenant_transaction,
)
from palimpsest.projections.store.unreadable import UnreadableEventError
from palimpsest.projections.store.work_due import mark_published, marked_tenants
from palimpsest.projections.views.belief_facts import belief_document, facts_of, projection_error
from palimpsest.projections.views.publications import publication_channel

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
    quarantined: int = 0
    """Memories set aside as unprojectable at their requested revision."""
    more: bool = True
    """Whether the tenant may have more to drain now (False once it was found clean, or
    left dirty only by other drains' leases or quarantined memories)."""


NOTE_CLEAN = (
    "UPDATE {schema}.revision_tenants SET drained_position ="
    " greatest(drained_position, %s) WHERE tenant_id = %s"
    # Not ``NOT EXISTS (SELECT 1 ... WHERE published < requested)``: PostgreSQL
    # guesses a third of the rows dirty, so it scanned the whole table to find
    # none (12-15 ms at 200,000 revisions, every pass). First by ``requested``,
    # the dirty ones come from their partial index (``revisions_dirty``), as the
    # claim's do; ``requested`` is never NULL, so NULL means none is dirty.
    " AND (SELECT requested FROM {schema}.revisions WHERE published < requested"
    " ORDER BY requested LIMIT 1) IS NULL"
)
"""Record a tenant clean as of a mark, if none of its memories is dirty (run as the
tenant: row-level security keeps the check to its revisions)."""


def _note_clean(log: EventLog, tenant_id: UUID, seen: int) -> None:
    """Record the tenant clean as of mark ``seen`` if it has no dirty memory now (one
    statement).

    A write that marks later has a larger position (positions follow commit
    order), so the tenant becomes eligible again. Memories that are dirty
    but leased by another drain keep the tenant eligible: if that drain
    dies, its lease expires and a later pass must find them. So do
    quarantined memories: each pass costs such a tenant one indexed query,
    and ``/metrics`` keeps counting them (it reads due tenants only).
    """
    # Sent whole: every write of the tenant upserts this row, and waits while it is
    # locked, holding the events table's lock. Planned for the tenant: a plan kept from
    # a tenant of a few revisions looked for a dirty one among all of a big tenant's.
    with queued_transaction(
        log.datastore, tenant_id, commit=True, durable=False, planned_for_tenant=True
    ) as cur:
        cur.execute(schema_query(NOTE_CLEAN, log.datastore.schema), (seen, tenant_id))


CLAIM = (
    "UPDATE {schema}.revisions r SET claimed_until = clock_timestamp()"
    " + make_interval(secs => %s)"
    # The claimed ids as an array, not a subquery joined: prepared, its LIMIT a
    # parameter, the join was planned as a hash join over a scan of the whole
    # table (8 ms at 20,000 memories, every pass).
    " WHERE r.tenant_id = {schema}.current_tenant() AND r.memory_id = ANY(ARRAY("
    "  SELECT memory_id FROM {schema}.revisions"
    "  WHERE published < requested"
    "  AND unprojectable_at IS DISTINCT FROM requested"
    "  AND (claimed_until IS NULL OR claimed_until < clock_timestamp())"
    "  ORDER BY requested LIMIT %s FOR UPDATE SKIP LOCKED))"
    " RETURNING r.memory_id, r.requested"
)
"""Lease up to a number of the tenant's dirty memories, oldest request first, for
some seconds (run as the tenant)."""


def _claim(log: EventLog, tenant_id: UUID, limit: int, lease_s: float) -> list[tuple[UUID, int]]:
    # Sent whole: the claimed rows stay locked only while PostgreSQL runs it. Planned
    # for the tenant: a plan kept from a small tenant's pass found the claimed ids by
    # reading every revision of the tenant, one or two there, all of a big one's
    # (50,000: 4 ms a pass), whatever the index.
    with queued_transaction(
        log.datastore, tenant_id, commit=True, durable=False, planned_for_tenant=True
    ) as cur:
        cur.execute(schema_query(CLAIM, log.datastore.schema), (lease_s, limit))
        claimed = cur.answer()
    return [(memory_id, requested) for memory_id, requested in claimed.rows]


@dataclass(frozen=True)
class _Computed:
    """A memory's belief row, computed from its facts, ready to publish."""

    memory_id: UUID
    revision: int
    memory_type: str
    scope: str
    project: str | None
    topic: str | None
    current_version_id: UUID | None
    grade: str
    document: str

    @classmethod
    def of(cls, facts: MemoryFacts, revision: int) -> _Computed:
        """Project ``facts``; raises whatever the projection raises on them."""
        belief = project_belief(facts)
        memory_type, scope, project, topic = storable(
            (facts.memory_type, facts.scope, facts.project, facts.topic)
        )
        return cls(
            facts.memory_id,
            revision,
            memory_type,
            scope,
            project,
            topic,
            belief.current_version_id,
            belief.grade,
            json.dumps(belief_document(belief)),
        )


def _publish(log: EventLog, tenant_id: UUID, facts: MemoryFacts, revision: int) -> None:
    _publish_all(log, tenant_id, [_Computed.of(facts, revision)])


def _publish_all(log: EventLog, tenant_id: UUID, beliefs: list[_Computed]) -> None:
    """Publish beliefs and watermarks of a batch in one transaction, never backwards."""
    if not beliefs:
        return
    # Rows locked in the order a write locks them (by memory id as text), so a
    # publish and a write of the same memories wait for each other, never deadlock.
    beliefs = sorted(beliefs, key=lambda b: str(b.memory_id))
    schema = log.datastore.schema
    ids = UuidArray(b.memory_id for b in beliefs)
    revisions = Int8Array(b.revision for b in beliefs)
    # One round trip, sent whole: the memories' revision rows (which their writers
    # upsert, holding the events table's lock) stay locked only while PostgreSQL runs
    # the statements.
    with queued_transaction(log.datastore, tenant_id, commit=True, durable=False) as cur:
        cur.execute(
            schema_query(
                "INSERT INTO {schema}.beliefs (memory_id, revision, memory_type, scope, project,"
                " topic, current_version_id, grade, belief) SELECT * FROM unnest(%b::uuid[],"
                " %b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], %b::uuid[],"
                # The documents go as text and PostgreSQL parses each as JSON: as a text
                # array literal each had its quotes escaped, then unescaped (2.4 ms of
                # this process's time for a batch of 100 beliefs, against 0.12 ms).
                " %b::text[], %b::text[]::jsonb[]) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                " revision = excluded.revision, memory_type = excluded.memory_type,"
                " scope = excluded.scope, project = excluded.project, topic = excluded.topic,"
                " current_version_id = excluded.current_version_id, grade = excluded.grade,"
                " belief = excluded.belief WHERE beliefs.revision < excluded.revision",
                schema,
            ),
            (
                ids,
                revisions,
                TextArray(b.memory_type for b in beliefs),
                TextArray(b.scope for b in beliefs),
                TextArray(b.project for b in beliefs),
                TextArray(b.topic for b in beliefs),
                UuidArray(b.current_version_id for b in beliefs),
                TextArray(b.grade for b in beliefs),
                TextArray(b.document for b in beliefs),
            ),
        )
        # Joined with the tenant's revision rows: planned for this tenant (a plan kept
        # from a small tenant's pass read every row of a big one's). The insert above
        # keeps its plan: it reads no table but through its conflict's index.
        cur.execute(PLAN_FOR_TENANT_SQL)
        cur.execute(
            schema_query(
                "UPDATE {schema}.revisions r SET published = greatest(r.published, u.revision),"
                " claimed_until = NULL, published_at = clock_timestamp()"
                " FROM unnest(%b::uuid[], %b::bigint[]) AS u(id, revision)"
                " WHERE r.memory_id = u.id",
                schema,
            ),
            (ids, revisions),
        )
        mark_published(cur, schema, tenant_id)  # recall has new versions to index
        # Delivered at commit: wakes requests waiting for this tenant's revision.
        cur.execute(b"SELECT pg_notify(%s, %s)", (publication_channel(schema), str(tenant_id)))


def drain_tenant(
    log: EventLog, tenant_id: UUID, seen: int, *, limit: int = 100, lease_s: float = LEASE_SECONDS
) -> DrainReport:
    """Recompute and publish up to ``limit`` dirty memories of one tenant; once fewer
    than ``limit`` were left to claim, record the tenant clean as of mark ``seen``
    (read before calling) if none is dirty after publishing (``more`` is then False:
    calling again finds nothing that was marked by ``seen``)."""
    batch = _claim(log, tenant_id, limit, lease_s)
    if not batch:
        _note_clean(log, tenant_id, seen)
        return DrainReport(0, 0, more=False)
    try:
        return _drain_claimed(log, tenant_id, seen, batch, limit)
    except Exception:
        # A failed batch's lease kept it from every drain, this one's retry included,
        # whatever the backoff said: the failure came back after each lease, logged
        # with the backoff's first wait, for ever. Given back, the backoff paces it.
        _release(log, tenant_id, batch)
        raise


def _release(log: EventLog, tenant_id: UUID, batch: list[tuple[UUID, int]]) -> None:
    """Give back the claims of a batch that failed (best effort: if this fails too, the
    lease expires)."""
    try:
        with tenant_transaction(log.datastore, tenant_id, commit=True, durable=False) as cur:
            cur.execute(
                schema_sql(
                    "UPDATE {schema}.revisions SET claimed_until = NULL"
                    " WHERE memory_id = ANY(%s::uuid[])",
                    log.datastore.schema,
                ),
                ([memory_id for memory_id, _ in batch],),
            )
    except Exception:
        _log.warning("claims of a failed batch not given back", extra={"tenant_id": str(tenant_id)})


def _drain_claimed(
    log: EventLog, tenant_id: UUID, seen: int, batch: list[tuple[UUID, int]], limit: int
) -> DrainReport:
    """Recompute and publish a claimed ``batch`` of the tenant (:func:`drain_tenant`)."""
    facts = facts_of(log, tenant_id, [memory_id for memory_id, _ in batch])
    computed: list[_Computed] = []
    failed: list[tuple[UUID, int, Exception]] = []
    unreadable = _unreadable(log, tenant_id, [m for m, _ in batch if m not in facts])
    for memory_id, requested in batch:
        if memory_id in unreadable:  # quarantined as a projection that raises is
            failed.append((memory_id, requested, unreadable[memory_id]))
            continue
        if memory_id not in facts:
            _log.error("dirty memory has no events", extra={"memory_id": str(memory_id)})
            continue
        try:
            computed.append(_Computed.of(facts[memory_id], requested))
        except Exception as error:  # the same events fail the same way: retrying is futile
            failed.append((memory_id, requested, error))
    try:
        # Its claims hold the batch for the lease: a publish PostgreSQL rolled back (a
        # deadlock with a group of writes) is tried again now, not after the lease.
        retry_rolled_back(partial(_publish_all, log, tenant_id, computed), "publish")
    except DataError:
        # PostgreSQL refused a value of one memory, failing the batch: publish each
        # alone, and quarantine only those it still refuses.
        published = list(computed)
        computed.clear()
        for belief in published:
            try:
                retry_rolled_back(partial(_publish_all, log, tenant_id, [belief]), "publish")
                computed.append(belief)
            except DataError as error:
                failed.append((belief.memory_id, belief.revision, error))
    _quarantine(log, tenant_id, failed)
    last = len(batch) < limit
    if last:
        # In a transaction of its own: the tenant's row is upserted by every write of
        # the tenant after its revision rows, so taking it while holding those of the
        # batch (in the publish) deadlocks with a group of writes.
        _note_clean(log, tenant_id, seen)
    return DrainReport(len(batch), len(computed), len(failed), more=not last)


def _unreadable(log: EventLog, tenant_id: UUID, missing: list[UUID]) -> dict[UUID, Exception]:
    """Return why each of the memories a load left out cannot be read: an event of its
    this release cannot decode or apply (:mod:`palimpsest.projections.store.unreadable`)."""
    if not missing:
        return {}
    loaded = aggregates_of(log, tenant_id, missing)
    return {
        memory_id: UnreadableEventError(event) for memory_id, event in loaded.unreadable.items()
    }


def _quarantine(log: EventLog, tenant_id: UUID, failed: list[tuple[UUID, int, Exception]]) -> None:
    """Set aside memories that cannot be projected at their requested revision, with
    the error (logged once here, not at every sweep)."""
    if not failed:
        return
    errors = [projection_error(error) for _, _, error in failed]
    with tenant_transaction(
        log.datastore, tenant_id, commit=True, durable=False, planned_for_tenant=True
    ) as cur:
        cur.execute(
            schema_sql(
                "UPDATE {schema}.revisions r SET unprojectable_at = u.revision,"
                " unprojectable_error = u.error, claimed_until = NULL"
                " FROM unnest(%s::uuid[], %s::bigint[], %s::text[]) AS u(id, revision, error)"
                " WHERE r.memory_id = u.id AND r.requested = u.revision",
                log.datastore.schema,
            ),
            (
                [memory_id for memory_id, _, _ in failed],
                [revision for _, revision, _ in failed],
                errors,
            ),
        )
        # A read waiting for these answers ``unprojectable`` now: wake it at commit.
        cur.execute(
            "SELECT pg_notify(%s, %s)", (publication_channel(log.datastore.schema), str(tenant_id))
        )
    for (memory_id, revision, _), error in zip(failed, errors, strict=True):
        _log.error(
            "memory quarantined: it cannot be projected",
            extra={
                "tenant_id": str(tenant_id),
                "memory_id": str(memory_id),
                "revision": revision,
                "error": error,
            },
        )


def drain_revisions(
    log: EventLog, *, limit: int = 100, lease_s: float = LEASE_SECONDS
) -> DrainReport:
    """Recompute and publish up to ``limit`` dirty memories per tenant marked dirty.

    Idempotent and safe to run concurrently: at-least-once delivery of a
    wake-up message only ever costs a recompute. A tenant's failure is
    raised (the drain loop and the workers run tenants one at a time with
    :func:`drain_tenant` instead).
    """
    claimed = published = quarantined = 0
    for tenant_id, seen in marked_tenants(log.datastore, "revision").items():
        report = drain_tenant(log, tenant_id, seen, limit=limit, lease_s=lease_s)
        claimed += report.claimed
        published += report.published
        quarantined += report.quarantined
    return DrainReport(claimed, published, quarantined)
