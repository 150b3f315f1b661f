"""Recording a decay cycle: its fades, its prunes, and its report, in one write.

The decay cycle (:mod:`palimpsest.projections.drains.decay_cycle`) scores and buckets the
tenant's memories; this spec records the outcome on the aggregates, so one
transaction holds all of it, or none (a cycle killed mid-write leaves nothing):

- each prune is, by default, a proposal in the forgetting pass's review queue
  (model ``decay-cycle``, the cycle's id as its run): ``supersede`` by the
  newer memory for the older side of a likely duplicate, ``decay`` otherwise
  (applying it forgets the memory, as an ``archive`` proposal does);
  a memory with an open proposal of that action gets no second one;
- a prune the cycle may archive itself (the policy's ``auto_archive_decayed``,
  unpinned, not an ``event``, below the importance floor, planned within the
  collapse guard's allowance: decided by the caller) is a ``forget`` decision
  with reason ``decayed``, which ``restore`` reverses; the memories archived
  are claimed from the day's allowance in this write's transaction
  (:mod:`palimpsest.projections.commands.collapse_guard`), and the whole write is
  refused if another write spent it meanwhile (the caller plans again);
- a memory that changed since it was scored (another version, archived,
  erased, pinned) is left alone, and so is one whose proposal of the same
  action from a cycle a person rejected while the memory was at its current
  version (a rejection holds until the memory gets a new version);
- a memory pinned since it was scored is not faded either: the cycle read its
  inputs from beliefs that may lag the pin, and this write decides from the
  memory itself;
- the ``Cycle`` aggregate's ``CycleCompleted`` records the rest: the fades
  (the label) and the report, with how many prunes the collapse guard held back
  and how many scores fell back to the heuristic importance.

Consolidating the survivors comes after this write (its merges are writes of
their own); :class:`CycleConsolidatedSpec` then records what it did on the same
aggregate (``CycleConsolidated``), once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID, uuid5

from palimpsest.domain.cycle import FACTOR_MEANINGS, Cycle
from palimpsest.domain.forgetting_policy import FACTORS
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import Proposal
from palimpsest.domain.retention_score import Factors
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.collapse_guard import CollapseGuardSettings, claim_archivals
from palimpsest.projections.commands.decisions import LabelSpec, decide_label, seen_version
from palimpsest.projections.commands.proposals import open_proposal_ids
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "CYCLE_MODEL",
    "CycleConsolidatedSpec",
    "CycleSpec",
    "DECAYED",
    "Prune",
]

CYCLE_MODEL = "decay-cycle"
"""The ``model`` of the proposals a cycle makes (the review queue shows it)."""

DECAYED = "decayed"
"""The reason of a memory the cycle archived itself."""


@dataclass(frozen=True)
class Prune:
    """One memory the cycle bucketed prune, as it scored it."""

    memory_id: UUID
    version_id: UUID
    """The version it scored: a memory with another version now is left alone."""
    score: float
    archive: bool
    """Archive it directly (the policy allows it, and so does the guard)."""
    duplicate_of: UUID | None = None
    """The newer memory it likely duplicates (it was forced into the prune path)."""
    similarity: float | None = None
    factors: Factors | None = None
    """The four factors of its score, which the proposal's note states for a reviewer."""


@dataclass(frozen=True)
class CycleSpec(WriteSpec):
    """Record one decay cycle's outcome (see the module's rules)."""

    role = "writer"
    action = "record decay cycles"

    cycle_id: UUID
    snapshot_at: datetime
    policy_version: int
    counts: dict[str, int]
    by_type: dict[str, dict[str, int]]
    duplicates: list[dict[str, Any]]
    faded: tuple[UUID, ...]
    unfaded: tuple[UUID, ...]
    prunes: tuple[Prune, ...]
    guard: CollapseGuardSettings = field(default_factory=CollapseGuardSettings)
    """The collapse guard the archivals are claimed under."""
    held_back: int = 0
    """Prunes planned as proposals because the collapse guard was reached."""
    importance_fallbacks: int = 0
    """Scores whose importance fell back to the heuristic."""

    def apply(self, batch: Batch) -> Item:
        """Make the prunes' proposals and archivals, then record the cycle.

        Raises:
            CollapseGuardError: the archivals would pass the day's allowance (raised
                when the write is recorded; nothing of the cycle is).
        """
        uow = batch.uow
        uow.preload([p.memory_id for p in self.prunes] + list(self.faded))
        open_ids = {
            action: open_proposal_ids(uow.log, uow.caller.tenant_id, action)
            for action in ("decay", "supersede")
        }
        rejected = _rejected(uow)
        proposals: list[str] = []
        archived: list[str] = []
        for prune in self.prunes:
            memory = uow.load(prune.memory_id, Memory, "memory")
            if not _unchanged(memory, prune):
                continue
            if prune.archive:
                decide_label(uow, LabelSpec(memory.id, "forget", DECAYED))
                archived.append(str(memory.id))
                continue
            action = "decay" if prune.duplicate_of is None else "supersede"
            if memory.id in open_ids[action] or _held(uow, rejected, memory, action):
                continue
            proposal = self._propose(uow, memory, prune, action)
            if proposal is not None:
                open_ids[action].add(memory.id)
                proposals.append(str(proposal.id))
        claim_archivals(batch, len(archived), self.guard)
        faded = [str(i) for i in self.faded if not uow.load(i, Memory, "memory").pinned]
        cycle = Cycle(
            id=self.cycle_id,
            tenant_id=uow.caller.tenant_id,
            snapshot_at=self.snapshot_at,
            policy_version=self.policy_version,
            counts=self.counts,
            by_type=self.by_type,
            duplicates=self.duplicates,
            faded=faded,
            unfaded=[str(i) for i in self.unfaded],
            proposals=proposals,
            archived=archived,
            principal_id=uow.caller.principal_id,
            held_back=self.held_back,
            importance_fallbacks=self.importance_fallbacks,
        )
        uow.add(cycle)
        return Item(
            cycle.id,
            (cycle.id, cycle.version),
            {"id": str(cycle.id), "proposals": proposals, "archived": archived, "faded": faded},
        )

    def _propose(
        self, uow: UnitOfWork, memory: Memory, prune: Prune, action: str
    ) -> Proposal | None:
        seen = [seen_version(memory)]
        if prune.duplicate_of is not None:
            newer = uow.load(prune.duplicate_of, Memory, "memory")
            if newer.erased_by is not None or newer.archived is not None:
                return None
            seen.append(seen_version(newer))
            note = f"likely duplicate of {newer.id} (similarity {prune.similarity})"
        else:
            note = _decay_note(prune)
        proposal = Proposal.propose(
            id=_proposal_id(self.cycle_id, memory.id),
            tenant_id=uow.caller.tenant_id,
            memory_id=memory.id,
            action=action,
            related_memory_id=prune.duplicate_of,
            probability=None,
            distribution=None,
            model=CYCLE_MODEL,
            run_id=self.cycle_id,
            seen=seen,
            policy_version=f"forgetting-policy/{self.policy_version}",
            dismissed=False,
            note=note,
        )
        uow.add(proposal)
        return proposal


@dataclass(frozen=True)
class CycleConsolidatedSpec(WriteSpec):
    """Record what consolidating a recorded cycle's survivors did (``summary``: the
    run's ``consolidation``). A cycle already consolidated records nothing again."""

    role = "writer"
    action = "record decay cycles"

    cycle_id: UUID
    summary: dict[str, Any]

    def apply(self, batch: Batch) -> Item:
        """Add ``CycleConsolidated`` to the cycle.

        Raises:
            NotFoundError: no such cycle in the caller's tenant.
        """
        uow = batch.uow
        cycle = uow.load(self.cycle_id, Cycle, "cycle")
        recorded = cycle.consolidated(self.summary, uow.caller.principal_id)
        return Item(
            cycle.id,
            (cycle.id, cycle.version) if recorded else None,
            {"id": str(cycle.id), "consolidation": cycle.consolidation},
        )


def _decay_note(prune: Prune) -> str:
    """Why the cycle proposes archiving the memory, in words a reviewer reads."""
    note = f"decayed: retention score {prune.score:.3f} below the prune threshold"
    if prune.factors is None:
        return note
    factors = {name: getattr(prune.factors, name) for name in FACTORS}
    lowest = min(factors, key=lambda name: factors[name])
    shown = ", ".join(f"{name} {value:.2f}" for name, value in factors.items())
    return f"{note}; factors {shown}; lowest: {lowest} ({FACTOR_MEANINGS[lowest]})"


def _rejected(uow: UnitOfWork) -> dict[tuple[UUID, str], list[UUID]]:
    """The cycles' rejected proposals, by (memory, action)."""
    found: dict[tuple[UUID, str], list[UUID]] = {}
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT proposal_id, memory_id, action FROM {schema}.retention_proposals"
                " WHERE model = %s AND status = 'rejected'",
                uow.log.datastore.schema,
            ),
            (CYCLE_MODEL,),
        )
        for r in cur.fetchall():
            found.setdefault((r["memory_id"], r["action"]), []).append(r["proposal_id"])
    return found


def _held(
    uow: UnitOfWork, rejected: dict[tuple[UUID, str], list[UUID]], memory: Memory, action: str
) -> bool:
    """Whether a person rejected this action for the memory at its current version."""
    current = str(memory.current_version.version_id)
    for proposal_id in rejected.get((memory.id, action), []):
        proposal = uow.load(proposal_id, Proposal, "proposal")
        if any(
            s["memory_id"] == str(memory.id) and s["version_id"] == current for s in proposal.seen
        ):
            return True
    return False


def _unchanged(memory: Memory, prune: Prune) -> bool:
    """Whether the memory is as the cycle scored it: same version, live, unpinned."""
    return (
        memory.erased_by is None
        and memory.archived is None
        and not memory.pinned
        and memory.current_version.version_id == prune.version_id
    )


def _proposal_id(cycle_id: UUID, memory_id: UUID) -> UUID:
    """The id of the cycle's proposal about a memory: derived, so a retried write
    builds the same proposal."""
    return uuid5(cycle_id, f"decay:{memory_id}")
