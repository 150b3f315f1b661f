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
import threading
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError

from domain.belief import Belief, EdgeFact, MemoryFacts, project_belief
from domain.memory import Memory
from projections._tenancy import tenant_scope, tenant_transaction
from projections.eventlog import EventLog

__all__ = ["DrainLoop", "DrainReport", "belief_document", "drain_revisions", "memory_facts"]

_log = logging.getLogger(__name__)
LEASE_SECONDS = 10.0
"""How long a claim keeps other drains away; a killed drain delays its batch this long."""


@dataclass(frozen=True)
class DrainReport:
    """What one drain call did."""

    claimed: int
    published: int


def memory_facts(log: EventLog, tenant_id: UUID, memory_id: UUID) -> MemoryFacts | None:
    """Return what the log records about a memory (None if the tenant has no such memory)."""
    with tenant_scope(tenant_id):
        try:
            memory: object = log.repository.get(memory_id)
        except AggregateNotFoundError:
            return None
    if not isinstance(memory, Memory):
        return None
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT linked_id, kind, outgoing, edge_id, position FROM "{log.datastore.schema}"'
            ".memory_links WHERE memory_id = %s",
            (memory_id,),
        )
        edges = tuple(
            EdgeFact(
                edge_id=row["edge_id"],
                kind=row["kind"],
                source_id=memory_id if row["outgoing"] else row["linked_id"],
                target_id=row["linked_id"] if row["outgoing"] else memory_id,
                position=row["position"],
            )
            for row in cur
        )
    return MemoryFacts(
        memory_id=memory.id,
        memory_type=memory.memory_type,
        scope=memory.scope,
        project=memory.project,
        topic=memory.topic,
        version_ids=tuple(v.version_id for v in memory.versions),
        contributions=tuple(memory.contributions),
        edges=edges,
    )


def belief_document(belief: Belief) -> dict[str, Any]:
    """Return the JSON form of a belief, as stored in the read model and served."""
    return {
        "memory_id": str(belief.memory_id),
        "current_version_id": str(belief.current_version_id),
        "grade": belief.grade,
        "support": [str(c) for c in belief.support],
        "alternatives": [str(m) for m in belief.alternatives],
        "labels": {"superseded_by": [str(m) for m in belief.superseded_by]},
        "applicability": {"scope": belief.scope, "project": belief.project},
        "reasons": [r.as_dict() for r in belief.reasons],
    }


def _tenants(log: EventLog) -> list[tuple[UUID, int]]:
    """Return tenants marked since they were last found clean, with the mark seen."""
    with log.datastore.transaction(commit=False) as cur:
        cur.execute(
            f'SELECT tenant_id, marked_position FROM "{log.datastore.schema}".revision_tenants'
            " WHERE marked_position > drained_position"
        )
        return [(row["tenant_id"], row["marked_position"]) for row in cur]


def _note_clean(log: EventLog, tenant_id: UUID, seen: int) -> None:
    """Record that nothing was dirty once every mark up to ``seen`` had committed.

    A write that marks later has a larger position (positions follow commit
    order), so the tenant becomes eligible again. Memories that are dirty
    but leased by another drain keep the tenant eligible: if that drain
    dies, its lease expires and a later pass must find them.
    """
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(f'SELECT 1 FROM "{schema}".revisions WHERE published < requested LIMIT 1')
        if cur.fetchone() is None:
            cur.execute(
                f'UPDATE "{schema}".revision_tenants SET drained_position = '
                "greatest(drained_position, %s) WHERE tenant_id = %s",
                (seen, tenant_id),
            )


def _claim(log: EventLog, tenant_id: UUID, limit: int, lease_s: float) -> list[tuple[UUID, int]]:
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            f'UPDATE "{schema}".revisions r SET claimed_until = clock_timestamp() '
            "+ make_interval(secs => %s) FROM ("
            f'  SELECT memory_id FROM "{schema}".revisions'
            "  WHERE published < requested"
            "  AND (claimed_until IS NULL OR claimed_until < clock_timestamp())"
            "  ORDER BY requested LIMIT %s FOR UPDATE SKIP LOCKED) c "
            f'WHERE r.tenant_id = "{schema}".current_tenant() AND r.memory_id = c.memory_id '
            "RETURNING r.memory_id, r.requested",
            (lease_s, limit),
        )
        return [(row["memory_id"], row["requested"]) for row in cur]


def _publish(log: EventLog, tenant_id: UUID, facts: MemoryFacts, revision: int) -> None:
    belief = project_belief(facts)
    schema = log.datastore.schema
    with tenant_transaction(log.datastore, tenant_id, commit=True) as cur:
        cur.execute(
            f'INSERT INTO "{schema}".beliefs (memory_id, revision, memory_type, scope, project,'
            " topic, current_version_id, grade, belief) VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
            " %s) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET revision = excluded.revision,"
            " memory_type = excluded.memory_type, scope = excluded.scope,"
            " project = excluded.project, topic = excluded.topic,"
            " current_version_id = excluded.current_version_id, grade = excluded.grade,"
            " belief = excluded.belief WHERE beliefs.revision < excluded.revision",
            (
                facts.memory_id,
                revision,
                facts.memory_type,
                facts.scope,
                facts.project,
                facts.topic,
                belief.current_version_id,
                belief.grade,
                json.dumps(belief_document(belief)),
            ),
        )
        cur.execute(
            f'UPDATE "{schema}".revisions SET published = greatest(published, %s),'
            " claimed_until = NULL WHERE memory_id = %s",
            (revision, facts.memory_id),
        )


def drain_revisions(
    log: EventLog, *, limit: int = 100, lease_s: float = LEASE_SECONDS
) -> DrainReport:
    """Recompute and publish up to ``limit`` dirty memories per tenant.

    Idempotent and safe to run concurrently: at-least-once delivery of a
    wake-up message only ever costs a recompute.
    """
    claimed = published = 0
    for tenant_id, seen in _tenants(log):
        batch = _claim(log, tenant_id, limit, lease_s)
        if not batch:
            _note_clean(log, tenant_id, seen)
        for memory_id, requested in batch:
            claimed += 1
            facts = memory_facts(log, tenant_id, memory_id)
            if facts is None:
                _log.error("dirty memory has no events", extra={"memory_id": str(memory_id)})
                continue
            _publish(log, tenant_id, facts, requested)
            published += 1
    return DrainReport(claimed, published)


class DrainLoop:
    """Drains in a background thread of this process (the embedded default).

    ``wake()`` is the hint a write sends after it commits; the loop also
    sweeps every ``sweep_s`` seconds, so a hint that never came only delays
    work. Each pass drains until nothing is left to claim.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        sweep_s: float = 1.0,
        batch: int = 100,
        lease_s: float = LEASE_SECONDS,
    ) -> None:
        self.log = log
        self.lease_s = lease_s
        self.sweep_s = sweep_s
        self.batch = batch
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="palimpsest-drain", daemon=True)

    def start(self) -> None:
        """Start draining (a first pass runs at once: work left by a previous run)."""
        self._wake.set()
        self._thread.start()

    def wake(self) -> None:
        """Ask for a pass now (a hint: safe to call any number of times)."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the current batch and stop."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.sweep_s)
            self._wake.clear()
            try:
                while (
                    not self._stop.is_set()
                    and drain_revisions(self.log, limit=self.batch, lease_s=self.lease_s).claimed
                ):
                    pass
            except Exception:
                # The loop must outlive a database restart; the work stays in
                # the database and the next pass retries it.
                _log.exception("drain pass failed; retrying at the next sweep")
