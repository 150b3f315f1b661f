"""The stages of a drain pass, each over the tenants that have its work due.

A pass runs, in order: retention (shorter deadlines first, so expiry sees
them in the same pass), expiry, tenant erasure, revisions, and (with an
embedder) indexing, which reads what revisions published. Each stage lists
its tenants from the work-due rows (:mod:`palimpsest.projections.store.work_due`; the
loop reads those of every stage but indexing in one statement), so an idle
store costs a few index lookups per pass whatever its number of tenants, and
runs one bounded batch per tenant. :func:`run_pass` runs a
stage with :func:`palimpsest.projections.drains.isolation.run_stage`: a failing
tenant fails alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from palimpsest.projections.drains._expiry import expire_tenant
from palimpsest.projections.drains._retention import apply_tenant_retention
from palimpsest.projections.drains._tenant_erasure import erase_tenant
from palimpsest.projections.drains.isolation import Backoff, run_stage
from palimpsest.projections.drains.revision import LEASE_SECONDS, DrainReport, drain_tenant
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.indexing import index_due, index_pending
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.tenancy import known_tenants
from palimpsest.projections.store.work_due import (
    PassKind,
    expiry_due,
    mark_index_due,
    marked_tenants,
    note_done,
)

__all__ = [
    "Stage",
    "drain_stages",
    "erasure_stage",
    "expiry_stage",
    "index_stage",
    "retention_stage",
    "revision_stage",
    "run_pass",
]


@dataclass(frozen=True)
class Stage:
    """One kind of background work: which tenants have it due, and one bounded batch
    of one tenant."""

    name: str
    due: Callable[[], Mapping[UUID, int]]
    """The tenants with this work due, each with the mark seen (0 for expiry)."""
    run: Callable[[UUID, int], int]
    """One batch of one tenant, given the mark seen; returns how much it did (0 when it
    knows the tenant has nothing left: a repeating stage then stops)."""
    repeat: bool = False
    """Whether a pass runs this stage again while it did anything (drains a backlog)."""
    first_pass: Callable[[], list[UUID]] | None = None
    """The tenants a process's first pass also runs it for, due or not (work that no
    mark records: a model change makes every memory due again)."""
    kind: PassKind | None = None
    """Its tenants' key in :func:`palimpsest.projections.store.work_due.due_work`, which a
    pass reads once for the stages that have one (None: only ``due`` reads them: indexing, whose
    tenants the revisions just before it mark)."""


def run_pass(
    stage: Stage,
    backoff: Backoff,
    *,
    first: bool = False,
    due: Mapping[UUID, int] | None = None,
) -> int:
    """Run one batch of ``stage`` for each of its due tenants (``due``, when the caller
    read them already, else ``stage.due()``; and, if ``first``, those of its
    ``first_pass``); return how much it did. Never raises."""
    marks: dict[UUID, int] = {}

    def tenants() -> list[UUID]:
        marks.clear()
        marks.update(stage.due() if due is None else due)
        if first and stage.first_pass is not None:
            for tenant_id in stage.first_pass():
                marks.setdefault(tenant_id, 0)
        return list(marks)

    def run(tenant_id: UUID) -> int:
        return stage.run(tenant_id, marks[tenant_id])

    return run_stage(stage.name, tenants, run, backoff)


def index_stage(log: EventLog, embedder: Embedder, *, batch: int) -> Stage:
    """The indexing stage: embed the current versions of ``batch`` published memories
    per tenant with ``embedder``."""

    def run(tenant_id: UUID, seen: int) -> int:
        done = index_pending(log, embedder, limit=batch, tenants=lambda: [tenant_id])
        if done.embedded or done.marked:
            return done.embedded + done.marked
        if index_due(log, tenant_id):
            # Work that no publish marked (a model change made it due): keep the
            # tenant due for the next pass.
            mark_index_due(log.datastore, tenant_id)
        else:
            note_done(log.datastore, tenant_id, "index", seen)
        return 0

    return Stage(
        "indexing",
        lambda: marked_tenants(log.datastore, "index"),
        run,
        repeat=True,
        first_pass=lambda: known_tenants(log.datastore),
    )


def retention_stage(log: EventLog, *, batch: int, clock: Callable[[], datetime]) -> Stage:
    """The retention stage: move deadlines of tenants that shortened their retention."""
    return Stage(
        "retention",
        lambda: marked_tenants(log.datastore, "retention"),
        lambda t, seen: apply_tenant_retention(log, t, seen, now=clock(), limit=batch),
        kind="retention",
    )


def expiry_stage(log: EventLog, *, batch: int, clock: Callable[[], datetime]) -> Stage:
    """The expiry stage: expire observations whose deadline has passed by ``clock``."""
    return Stage(
        "expiry",
        lambda: dict.fromkeys(expiry_due(log.datastore, clock()), 0),
        lambda t, _: expire_tenant(log, t, now=clock(), limit=batch),
        kind="expiry",
    )


def erasure_stage(log: EventLog, *, batch: int) -> Stage:
    """The tenant erasure stage: erase deleted tenants a batch at a time."""
    return Stage(
        "erasure",
        lambda: marked_tenants(log.datastore, "deletion"),
        lambda t, seen: erase_tenant(log, t, seen, limit=batch),
        repeat=True,
        kind="deletion",
    )


def _backlog(report: DrainReport) -> int:
    """What a revision batch did, counted only when more may be waiting: a batch that
    left its tenant clean (or with only others' leases) ends the tenant's repeats."""
    return report.claimed if report.more else 0


def revision_stage(log: EventLog, *, batch: int, lease_s: float = LEASE_SECONDS) -> Stage:
    """The revision stage: publish the beliefs of dirty memories."""
    return Stage(
        "revisions",
        lambda: marked_tenants(log.datastore, "revision"),
        lambda t, seen: _backlog(drain_tenant(log, t, seen, limit=batch, lease_s=lease_s)),
        repeat=True,
        kind="revision",
    )


def drain_stages(
    log: EventLog,
    *,
    batch: int,
    lease_s: float = LEASE_SECONDS,
    clock: Callable[[], datetime],
    embedder: Embedder | None = None,
) -> list[Stage]:
    """Return the stages of a pass over ``log``, in the order they run."""
    stages = [
        retention_stage(log, batch=batch, clock=clock),
        expiry_stage(log, batch=batch, clock=clock),
        erasure_stage(log, batch=batch),
        revision_stage(log, batch=batch, lease_s=lease_s),
    ]
    if embedder is not None:
        stages.append(index_stage(log, embedder, batch=batch))
    return stages
