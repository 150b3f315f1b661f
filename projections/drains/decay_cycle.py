"""The decay cycle for one tenant: score, bucket, fade, prune, then consolidate.

Seed 001's batch path, at **one snapshot time** (``now``, read once) for
every score of the run:

1. Read the tenant's forgetting policy and its live memories with their
   score inputs (:mod:`palimpsest.projections.views.decay_inputs`), and its recent
   activity per scope and project.
2. *Duplicates first*: likely duplicates (one type, scope and project,
   similarity at least the policy's ``duplicate_floor``, never ``event``) are
   found before bucketing; the older side of each is forced into the prune
   path (as the older side of a supersession by the newer one).
3. *Score and bucket* each memory (:mod:`palimpsest.projections.drains._decay_scoring`,
   by :mod:`palimpsest.domain.retention_score`'s rules): keep,
   fade or prune. Pinned memories, and those at or above the importance
   floor, are never pruned. Scores whose importance fell back to the
   heuristic (a model scorer that failed) are counted.
4. *Record* (:class:`~palimpsest.projections.commands.cycle.CycleSpec`), in one write:
   the fades (the ``faded`` label), each prune as a proposal in the review
   queue, or, with ``auto_archive_decayed`` on, archived (reason
   ``decayed``) for non-``event`` memories within the collapse guard's
   allowance (those past it are proposed instead; the write reserves what it
   archives, and is planned again if another write spent the allowance
   meanwhile), and ``CycleCompleted``. A cycle in which any importance fell
   back archives nothing itself: a model outage must not change what is
   archived without a person, so its prunes are all proposed.
5. *Consolidate the survivors* (after eviction, never before): the
   consolidation pass, if installed, over the memories still live; then what
   it did is recorded on the cycle (``CycleConsolidated``), so reading the
   cycle back answers what the run answered.

A dry run stops after step 3 and returns the report, with every memory's
score, having written nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from palimpsest.domain.errors import CollapseGuardError
from palimpsest.domain.forgetting_policy import ForgettingPolicy
from palimpsest.domain.importance import ImportanceScorer
from palimpsest.domain.tenant import Tenant, principal_id_for
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.collapse_guard import (
    CollapseGuardSettings,
    archivals_left,
    guard_day,
)
from palimpsest.projections.commands.cycle import CycleConsolidatedSpec, CycleSpec, Prune
from palimpsest.projections.commands.forgetting_policy import forgetting_for
from palimpsest.projections.commands.writer import WriteOutcome, Writer
from palimpsest.projections.drains._decay_scoring import (
    bucket_counts,
    forced_duplicates,
    plan_prunes,
    score_memories,
    score_rows,
)
from palimpsest.projections.judgment.importance import configured_importance
from palimpsest.projections.store.aggregates import load_aggregate
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import known_tenants
from palimpsest.projections.views.decay_inputs import (
    decay_inputs,
    duplicate_pairs,
    recent_activity,
)
from palimpsest.projections.views.version_texts import version_texts

__all__ = [
    "CYCLE_PRINCIPAL",
    "CycleReport",
    "ScheduledCycle",
    "claim_slot",
    "run_cycle",
    "slot_of",
]

_log = logging.getLogger(__name__)

CYCLE_PRINCIPAL = "decay-cycle"
"""The principal the cycle records as, in each tenant."""

_GUARD_ATTEMPTS = 3
"""Writes of a cycle planned against the allowance left, before it archives nothing."""


@dataclass
class CycleReport:
    """What one cycle over a tenant did (or, dry, would do)."""

    cycle_id: UUID
    tenant_id: UUID
    dry_run: bool
    snapshot_at: datetime
    policy_version: int
    counts: dict[str, int] = field(default_factory=dict)
    by_type: dict[str, dict[str, int]] = field(default_factory=dict)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    faded: list[str] = field(default_factory=list)
    unfaded: list[str] = field(default_factory=list)
    proposals: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    held_back: int = 0
    """Prunes proposed instead of archived because the collapse guard was reached."""
    importance_fallbacks: int = 0
    """Scores whose importance is the heuristic's because the model scorer could not
    rate the memory (it failed, or answered no rating). With any, the cycle archived
    nothing itself: its prunes were proposed."""
    scores: list[dict[str, Any]] | None = None
    """Every memory's factors, score and bucket (dry runs only)."""
    consolidation: dict[str, Any] | None = None
    """What consolidating the survivors did (None: a dry run)."""

    def as_dict(self) -> dict[str, Any]:
        """Return the report as JSON values."""
        return asdict(self)


def run_cycle(
    log: EventLog,
    writer: Writer,
    tenant_id: UUID,
    *,
    now: datetime,
    model_id: str,
    dry_run: bool = False,
    guard: CollapseGuardSettings | None = None,
    scorer: ImportanceScorer | None = None,
) -> CycleReport:
    """Run the decay cycle over one tenant at the snapshot ``now`` (see the module's
    steps) and return its report. ``scorer`` defaults to the configured one
    (:func:`~palimpsest.projections.judgment.importance.configured_importance`: the
    heuristic unless ``PALIMPSEST_IMPORTANCE=openai``); ``guard`` to the
    environment's collapse guard. The guard's day is the writer's (its clock's UTC
    day), shared with every other write that archives."""
    guard = guard or CollapseGuardSettings()
    snapshot = now  # the one time every score of this run is computed at
    policy = forgetting_for(log, tenant_id)
    report = CycleReport(uuid4(), tenant_id, dry_run, snapshot, policy.version)
    memories = decay_inputs(log, tenant_id)
    activity = recent_activity(
        log,
        tenant_id,
        since=snapshot - timedelta(days=policy.activity_window_days),
        until=snapshot,
    )
    pairs = duplicate_pairs(
        log,
        tenant_id,
        [m for m in memories if m.memory_type != "event"],
        floor=policy.duplicate_floor,
        model_id=model_id,
    )
    scored = score_memories(
        memories,
        policy,
        snapshot=snapshot,
        activity=activity,
        forced=forced_duplicates(pairs),
        scorer=scorer or configured_importance(),
        texts={
            m: t.content
            for m, t in version_texts(
                log, tenant_id, {m.memory_id: m.version_id for m in memories}
            ).items()
        },
    )
    report.counts, report.by_type = bucket_counts(scored)
    report.duplicates = [
        {"older": str(s.memory.memory_id), "newer": str(s.duplicate_of), "similarity": s.similarity}
        for s in scored
        if s.duplicate_of is not None
    ]
    report.faded = [str(s.memory.memory_id) for s in scored if s.bucket == "fade"]
    report.unfaded = [
        str(s.memory.memory_id)
        for s in scored
        if s.bucket == "keep" and s.memory.faded_at is not None
    ]
    report.importance_fallbacks = sum(s.fallback for s in scored)
    automatic = policy.auto_archive_decayed and not report.importance_fallbacks
    if policy.auto_archive_decayed and report.importance_fallbacks:
        _log.warning(
            "importance fell back to the heuristic; the cycle archives nothing itself",
            extra={"tenant_id": str(tenant_id), "fallbacks": report.importance_fallbacks},
        )
    day = guard_day(writer.clock())
    allowed = archivals_left(log, tenant_id, day, guard) if automatic else 0
    prunes, report.held_back = plan_prunes(scored, automatic, allowed)
    if dry_run:
        report.scores = score_rows(scored)
        report.archived = [str(p.memory_id) for p in prunes if p.archive]
        return report
    caller = Caller(
        tenant_id, principal_id_for(tenant_id, CYCLE_PRINCIPAL), CYCLE_PRINCIPAL, "writer"
    )

    def record(planned: list[Prune]) -> WriteOutcome:
        spec = CycleSpec(
            cycle_id=report.cycle_id,
            snapshot_at=snapshot,
            policy_version=policy.version,
            counts=report.counts,
            by_type=report.by_type,
            duplicates=report.duplicates,
            faded=tuple(s.memory.memory_id for s in scored if s.bucket == "fade"),
            unfaded=tuple(UUID(i) for i in report.unfaded),
            prunes=tuple(planned),
            guard=guard,
            held_back=report.held_back,
            importance_fallbacks=report.importance_fallbacks,
        )
        return writer.write(caller, [spec], batch=False)

    outcome = None
    for _ in range(_GUARD_ATTEMPTS):
        try:
            outcome = record(prunes)
            break
        except CollapseGuardError:
            # Another write spent the allowance since it was read: plan with what is
            # left now (nothing of this attempt was recorded).
            allowed = archivals_left(log, tenant_id, day, guard)
            prunes, report.held_back = plan_prunes(scored, automatic, allowed)
    if outcome is None:
        # Still refused: archive nothing, propose every prune (no claim to refuse).
        prunes, report.held_back = plan_prunes(scored, automatic, 0)
        outcome = record(prunes)
    report.proposals = list(outcome.body["proposals"])
    report.archived = list(outcome.body["archived"])
    report.faded = list(outcome.body["faded"])
    gone = {*report.archived, *(str(p.memory_id) for p in prunes)}
    survivors = sorted((m.memory_id for m in memories if str(m.memory_id) not in gone), key=str)
    consolidation = _consolidate(
        log,
        writer,
        tenant_id,
        snapshot=snapshot,
        policy=policy,
        survivors=survivors,
        cycle_id=report.cycle_id,
        model_id=model_id,
        guard=guard,
    )
    report.consolidation = consolidation
    _record_consolidation(writer, caller, report.cycle_id, consolidation)
    return report


def _record_consolidation(
    writer: Writer, caller: Caller, cycle_id: UUID, summary: dict[str, Any]
) -> None:
    """Record what consolidation did on the cycle (``CycleConsolidated``), so a read of
    the cycle answers it as the run did. Its merges are recorded already: a failure
    here is logged, and the cycle reads back without it."""
    try:
        writer.write(caller, [CycleConsolidatedSpec(cycle_id, summary)], batch=False)
    except Exception:
        _log.exception("recording consolidation failed", extra={"cycle_id": str(cycle_id)})


def _consolidate(
    log: EventLog,
    writer: Writer,
    tenant_id: UUID,
    *,
    snapshot: datetime,
    policy: ForgettingPolicy,
    survivors: list[UUID],
    cycle_id: UUID,
    model_id: str,
    guard: CollapseGuardSettings,
) -> dict[str, Any]:
    """The seam to consolidation (:mod:`palimpsest.projections.drains._consolidation`): called
    after eviction is recorded, over the survivors. A failure there is logged and
    reported; it never undoes the eviction."""
    try:
        from palimpsest.projections.drains import _consolidation as consolidation  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return {"skipped": "consolidation not installed"}
    try:
        result: dict[str, Any] = consolidation.consolidate_survivors(
            log,
            writer,
            tenant_id,
            snapshot=snapshot,
            policy=policy,
            survivors=survivors,
            cycle_id=cycle_id,
            dry_run=False,
            model_id=model_id,
            guard=guard,
        )
    except Exception as error:
        _log.exception("consolidation failed", extra={"tenant_id": str(tenant_id)})
        return {"failed": str(error)}
    return result


def slot_of(now: datetime, minutes: int) -> datetime:
    """Return the start of the schedule slot (every ``minutes``, from the epoch, UTC)
    that ``now`` falls in."""
    step = minutes * 60
    seconds = int(now.astimezone(UTC).timestamp()) // step * step
    return datetime.fromtimestamp(seconds, UTC)


def claim_slot(log: EventLog, tenant_id: UUID, slot: datetime) -> bool:
    """Claim the tenant's scheduled cycle of ``slot``; False when another process (or
    an earlier call of this one) already did."""
    with log.datastore.transaction(commit=True) as cur:
        cur.execute(
            schema_sql(
                "INSERT INTO {schema}.decay_cycle_claims (tenant_id, slot, claimed_at)"
                " VALUES (%s, %s, clock_timestamp()) ON CONFLICT DO NOTHING RETURNING slot",
                log.datastore.schema,
            ),
            (tenant_id, slot),
        )
        return cur.fetchone() is not None


@dataclass
class ScheduledCycle:
    """The scheduled decay cycle, for a periodic job or a worker to call each minute.

    Each call runs the cycle for every tenant whose policy enables it and whose
    current slot (every ``schedule_minutes``, hourly by default) no process has
    claimed yet: the claim makes it run once per slot, whichever process gets it.
    """

    log: EventLog
    writer: Writer
    model_id: Callable[[], str]
    guard: CollapseGuardSettings = field(default_factory=CollapseGuardSettings)

    def __call__(self, now: datetime) -> list[CycleReport]:
        """Run every due cycle; return their reports."""
        reports = []
        for tenant_id in known_tenants(self.log.datastore):
            try:
                tenant = load_aggregate(self.log, tenant_id, tenant_id, Tenant, "tenant")
                policy = tenant.forgetting_policy()
                if tenant.deletion is not None or not policy.enabled:
                    continue
                if not claim_slot(self.log, tenant_id, slot_of(now, policy.schedule_minutes)):
                    continue
                reports.append(
                    run_cycle(
                        self.log,
                        self.writer,
                        tenant_id,
                        now=now,
                        model_id=self.model_id(),
                        guard=self.guard,
                    )
                )
            except Exception:  # one tenant's failure never stops the others
                _log.exception("decay cycle failed", extra={"tenant_id": str(tenant_id)})
        return reports
