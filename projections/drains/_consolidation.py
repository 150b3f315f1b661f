"""Consolidation of a decay cycle's survivors (seed 004): merge, then reflect.

The decay cycle calls :func:`consolidate_survivors` *after* its eviction
has committed: evict first, then consolidate what is left, so nothing
merged escapes scoring and nothing is scored before a merge (the new
consolidated memory is an ordinary memory the next cycle scores).

Pass 1, merge: pairs of survivors at or above the tenant's merge similarity
floor (:mod:`palimpsest.projections.recall.merge_candidates`) form groups
(:func:`palimpsest.domain.consolidation.merge_groups`); a memory already in an open
merge proposal is left out. Each group's text comes from the summariser
when one is configured, else it is the centre's text verbatim (extractive).
Each group is then one write: a ``merge`` proposal for a person, or, when
the policy's ``auto_apply_extractive_merges`` is on and the group is an
extractive merge of exact-or-near duplicates, the merge itself, within the
collapse guard's allowance (a merge it cannot hold is proposed instead:
``held_back``).

Pass 2, reflections: only with a summariser configured and the policy's
``reflections_enabled`` (there is no fallback); see
:mod:`palimpsest.projections.drains._reflections`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, Protocol
from uuid import UUID

from palimpsest.domain.consolidation import MergeGroup, MergeMember, merge_groups
from palimpsest.domain.errors import CollapseGuardError, PalimpsestError
from palimpsest.domain.memory import Memory
from palimpsest.domain.tenant import principal_id_for
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.collapse_guard import CollapseGuardSettings
from palimpsest.projections.commands.consolidation import (
    MergeSpec,
    ProposeMergeSpec,
    open_merge_members,
)
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._reflections import reflect
from palimpsest.projections.judgment.judge import JudgeUnavailableError
from palimpsest.projections.judgment.summariser import (
    Summariser,
    SummariserSettings,
    summariser_from,
)
from palimpsest.projections.recall.merge_candidates import similar_pairs
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.views.version_texts import version_events, version_texts

__all__ = [
    "CONSOLIDATION_PRINCIPAL",
    "ConsolidationKnobs",
    "consolidate_survivors",
]

_log = logging.getLogger(__name__)

CONSOLIDATION_PRINCIPAL = "consolidation"
"""The principal consolidation records its proposals, merges and reflections as."""


class ConsolidationKnobs(Protocol):
    """The tenant's forgetting policy fields consolidation reads."""

    @property
    def merge_similarity_floor(self) -> float: ...
    @property
    def auto_apply_extractive_merges(self) -> bool: ...
    @property
    def reflections_enabled(self) -> bool: ...
    @property
    def version(self) -> int: ...


def _recorded_at(log: EventLog, tenant_id: UUID, memories: list[Memory]) -> dict[UUID, datetime]:
    """Return when each memory's current version was recorded (its event's time)."""
    current = {m.id: m.current_version.version_id for m in memories}
    return {m: e.timestamp for m, e in version_events(log, tenant_id, current).items()}


def _members(
    log: EventLog, tenant_id: UUID, ids: list[UUID]
) -> tuple[list[MergeMember], dict[UUID, Memory]]:
    """Return the live, unpinned memories of ``ids`` as merge members, and the memories."""
    loaded = aggregates_of(log, tenant_id, ids)
    # A pinned memory is kept as it is: folding it into another would hide it.
    live = [
        m
        for m in loaded.values()
        if isinstance(m, Memory) and m.erased_by is None and m.archived is None and not m.pinned
    ]
    times = _recorded_at(log, tenant_id, live)
    members = []
    for memory in live:
        version = memory.current_version
        if memory.id not in times:
            continue
        support = {
            c.observation_id
            for c in memory.contributions
            if c.active and c.version_id == version.version_id
        }
        members.append(
            MergeMember(
                memory_id=memory.id,
                memory_type=memory.memory_type,
                scope=memory.scope,
                project=memory.project,
                support=len(support),
                recorded_at=times[memory.id],
                content_digest=version.content_digest,
            )
        )
    return members, {m.id: m for m in live}


def _least_similarity(group: MergeGroup, pairs: dict[tuple[UUID, UUID], float]) -> float:
    centre = group.centre.memory_id
    values = [
        pairs.get((centre, m.memory_id), pairs.get((m.memory_id, centre), 1.0))
        for m in group.members[1:]
    ]
    return min(values)


def consolidate_survivors(
    log: EventLog,
    writer: Writer,
    tenant_id: UUID,
    *,
    snapshot: datetime,
    policy: ConsolidationKnobs,
    survivors: Sequence[UUID],
    cycle_id: UUID,
    dry_run: bool,
    model_id: str,
    summariser: Summariser | Literal["settings"] | None = "settings",
    guard: CollapseGuardSettings | None = None,
) -> dict[str, Any]:
    """Merge similar survivors (as proposals, or directly where the policy allows),
    then reflect over them when a summariser is configured; return what it did.

    ``summariser``: ``settings`` (the default) reads :class:`SummariserSettings`;
    None forces extractive merges and no reflections; or the summariser to use.
    ``guard``: the collapse guard a direct merge spends (the environment's by
    default). A dry run finds the groups and writes nothing.
    """
    chosen = summariser_from(SummariserSettings()) if summariser == "settings" else summariser
    assert not isinstance(chosen, str)
    report: dict[str, Any] = {
        "groups": 0,
        "proposed": 0,
        "merged": 0,
        "already_open": 0,
        "held_back": 0,
        "reflections": 0,
        "summariser": chosen.model if chosen is not None else "extractive",
        "failures": [],
    }
    busy = open_merge_members(log, tenant_id)
    candidates = [m for m in survivors if m not in busy]
    report["already_open"] = len(survivors) - len(candidates)
    pairs = similar_pairs(
        log, tenant_id, candidates, model_id=model_id, floor=policy.merge_similarity_floor
    )
    involved = sorted({m for pair in pairs for m in pair}, key=str)
    members, memories = _members(log, tenant_id, involved)
    groups = merge_groups(members, pairs, policy.merge_similarity_floor)
    report["groups"] = len(groups)
    caller = Caller(
        tenant_id,
        principal_id_for(tenant_id, CONSOLIDATION_PRINCIPAL),
        CONSOLIDATION_PRINCIPAL,
        "writer",
    )
    if not dry_run and groups:
        versions = {
            m.memory_id: memories[m.memory_id].current_version.version_id
            for g in groups
            for m in g.members
        }
        texts = {m: t.content for m, t in version_texts(log, tenant_id, versions).items()}
        for group in groups:
            seen = tuple((m.memory_id, versions[m.memory_id]) for m in group.members)
            _merge(
                writer,
                caller,
                report,
                group,
                seen,
                texts,
                pairs,
                chosen,
                policy,
                cycle_id,
                guard or CollapseGuardSettings(),
            )
    if not dry_run and chosen is not None and policy.reflections_enabled:
        # After the merges, over what is still live (a merged source is not).
        report["reflections"] = reflect(
            log, writer, caller, chosen, survivors, cycle_id=cycle_id, failures=report["failures"]
        )
    return report


def _merge(
    writer: Writer,
    caller: Caller,
    report: dict[str, Any],
    group: MergeGroup,
    seen: tuple[tuple[UUID, UUID], ...],
    texts: dict[UUID, str | None],
    pairs: dict[tuple[UUID, UUID], float],
    summariser: Summariser | None,
    policy: ConsolidationKnobs,
    cycle_id: UUID,
    guard: CollapseGuardSettings,
) -> None:
    """Propose (or apply, where the policy and the collapse guard allow) one group's
    merge."""
    contents = [t for m in group.members if (t := texts.get(m.memory_id)) is not None]
    if len(contents) != len(group.members):
        report["failures"].append(f"{group.centre.memory_id}: a member's text is gone")
        return
    text = contents[0]
    model = "extractive"
    if summariser is not None:
        try:
            text = summariser.summarise(contents)
        except JudgeUnavailableError as error:
            report["failures"].append(f"{group.centre.memory_id}: {error}")
            return
        model = summariser.model
    direct = summariser is None and policy.auto_apply_extractive_merges and group.near_duplicate
    proposed = ProposeMergeSpec(
        seen=seen,
        content=text,
        model=model,
        run_id=cycle_id,
        similarity=_least_similarity(group, pairs),
    )
    try:
        if direct:
            merge = MergeSpec(
                seen=seen,
                content=text,
                model_id=None,
                reason=f"consolidation, cycle {cycle_id}",
                guard=guard,
            )
            try:
                writer.write(caller, [merge], batch=False)
            except CollapseGuardError:
                # The day's allowance is spent: a person decides this one.
                report["held_back"] += 1
                direct = False
        if not direct:
            writer.write(caller, [proposed], batch=False)
    except PalimpsestError as error:
        report["failures"].append(f"{group.centre.memory_id}: {error}")
        _log.warning("merge refused", extra={"error": str(error)})
        return
    report["merged" if direct else "proposed"] += 1
