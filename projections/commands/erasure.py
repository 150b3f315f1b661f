"""Erasure: remove content and the lineage derived from it, and say what went.

An erasure is one decision (``DecisionRecorded``, kind ``erasure``) whose
effects are recorded in the same transaction:

- ``ObservationErased`` for each named observation, and ``MemoryErased``
  for each named memory (all its versions go);
- ``MemoryVersionErased`` for each version formed only from erased
  observations (:func:`palimpsest.domain.erasure.versions_formed_only_from`), and
  ``MemoryErased`` once a memory has no live version left;
- ``ContributionDeactivated`` for each active contribution citing an erased
  observation, so memories that keep other support are recomputed from it;
- for each memory that lost a version's content here, every memory *derived
  from* it (a ``derived_from`` edge to it: a consolidated memory, whose text a
  model may have written from the source's, or copied), transitively: all its
  versions are erased (``MemoryVersionErased``, ``MemoryErased``), their
  operations naming the memories they were derived from (``derived_from``),
  since which words of a derived text came from which source cannot be told;
- ``ReflectionRedacted`` for each reflection, and ``MergeTextErased`` for each
  merge proposal (whatever its status), drawn from a memory that lost a
  version's content here (their text may repeat or paraphrase what was erased).

The recorder deletes the payload rows in that transaction (unless a live
observation or version holds the same bytes), and raises the revision of
every memory touched, citing, or linked to those: their beliefs are
recomputed by the revision drain. The decision lists every operation with
the digests of what was removed; the receipt sums them and carries the
decision, so what was erased as derived, and what was redacted, is there by id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from palimpsest.domain.decision import DecisionParams
from palimpsest.domain.erasure import versions_formed_only_from
from palimpsest.domain.errors import ConflictError, InvalidInputError
from palimpsest.domain.limits import MAX_BATCH_ITEMS, MAX_REASON_CHARS
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.domain.proposal import Proposal
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.consolidation import redact_reflections
from palimpsest.projections.commands.decisions import (
    Operations,
    record_decision,
    seen_version,
)
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.aggregates import stranded_memories
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction

__all__ = [
    "EraseSpec",
    "decide_erase",
]


@dataclass(frozen=True)
class EraseSpec(WriteSpec):
    """Erase observations and memories, for a stated reason."""

    role = "admin"
    action = "erase"

    observation_ids: tuple[UUID, ...]
    memory_ids: tuple[UUID, ...]
    reason: str
    part_of: UUID | None = None
    """The tenant deletion this erasure is a batch of, if any."""

    def apply(self, batch: Batch) -> Item:
        """Erase, as a decision (see :func:`decide_erase`)."""
        return decide_erase(batch.uow, self)


def _check(spec: EraseSpec) -> str:
    reason = spec.reason.strip()
    if not reason:
        msg = "an erasure requires a non-blank reason"
        raise InvalidInputError(msg)
    if len(reason) > MAX_REASON_CHARS:
        msg = f"reason has {len(reason)} characters; the limit is {MAX_REASON_CHARS}"
        raise InvalidInputError(msg)
    count = len(spec.observation_ids) + len(spec.memory_ids)
    if count == 0:
        msg = "an erasure names at least one observation or memory"
        raise InvalidInputError(msg)
    if count > MAX_BATCH_ITEMS:
        msg = f"an erasure names at most {MAX_BATCH_ITEMS} ids, got {count}"
        raise InvalidInputError(msg)
    return reason


def _citing(uow: UnitOfWork, observation_ids: list[UUID]) -> list[UUID]:
    """Return the memories citing any of the observations (the evidence rows)."""
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT DISTINCT memory_id FROM {schema}.evidence_links"
                " WHERE observation_id = ANY(%s)",
                uow.log.datastore.schema,
            ),
            (observation_ids,),
        )
        return sorted((row["memory_id"] for row in cur), key=str)


def _linked(uow: UnitOfWork, memory_ids: list[UUID]) -> list[UUID]:
    """Return memories joined by an edge to any of ``memory_ids`` (outside that set)."""
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT DISTINCT linked_id FROM {schema}.memory_links"
                " WHERE memory_id = ANY(%s) AND NOT linked_id = ANY(%s)",
                uow.log.datastore.schema,
            ),
            (memory_ids, memory_ids),
        )
        return sorted((row["linked_id"] for row in cur), key=str)


def _derived_from(uow: UnitOfWork, memory_ids: list[UUID]) -> dict[UUID, set[UUID]]:
    """Return the memories with a ``derived_from`` edge to any of ``memory_ids``, each
    with those it is derived from. Retracted edges count too: retracting one ends its
    archival, not the fact that the text was drawn from the source."""
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT memory_id, linked_id FROM {schema}.memory_links"
                " WHERE linked_id = ANY(%s) AND kind = 'derived_from' AND outgoing",
                uow.log.datastore.schema,
            ),
            (memory_ids,),
        )
        found: dict[UUID, set[UUID]] = {}
        for row in cur:
            found.setdefault(row["memory_id"], set()).add(row["linked_id"])
        return found


def _merge_proposals(uow: UnitOfWork, memory_ids: list[UUID]) -> list[Proposal]:
    """Return the merge proposals drawn from any of ``memory_ids`` (whatever their
    status), loaded into the unit of work."""
    if not memory_ids:
        return []
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT proposal_id FROM {schema}.retention_proposals"
                " WHERE action = 'merge' AND source_ids && %s::uuid[] ORDER BY proposal_id",
                uow.log.datastore.schema,
            ),
            (memory_ids,),
        )
        ids = [row["proposal_id"] for row in cur]
    uow.preload(ids)
    return [uow.load(i, Proposal, "proposal") for i in ids]


def _version_ops(
    memory: Memory, versions: list[Any], derived_from: str | None = None
) -> list[dict[str, str]]:
    ops: list[dict[str, str]] = []
    for record in versions:
        erased = {
            "op": "erase_version",
            "memory_id": str(memory.id),
            "version_id": str(record.version_id),
            "digest": record.content_digest,
        }
        ops.append(erased if derived_from is None else {**erased, "derived_from": derived_from})
        ops.extend(
            {
                "op": "erase_excerpt",
                "memory_id": str(memory.id),
                "version_id": str(record.version_id),
                "digest": excerpt.excerpt_digest,
            }
            for excerpt in record.excerpts
        )
    return ops


def _lost(accepted: list[dict[str, str]]) -> set[UUID]:
    """Return the memories that lost a version's content in ``accepted``."""
    return {UUID(op["memory_id"]) for op in accepted if op["op"] == "erase_version"}


def _erase_derived(
    uow: UnitOfWork, accepted: list[dict[str, str]], decision_id: UUID
) -> tuple[list[Memory], list[dict[str, str]], list[dict[str, str]]]:
    """Erase every memory derived from one that lost content in ``accepted``, then
    every memory derived from those, and so on; return them, the operations (each
    naming what it was derived from) and what the decision saw of them."""
    erased: list[Memory] = []
    ops: list[dict[str, str]] = []
    seen: list[dict[str, str]] = []
    frontier = _lost(accepted)
    done = set(frontier)
    while frontier:
        derived = _derived_from(uow, sorted(frontier, key=str))
        uow.preload(sorted(derived, key=str))
        frontier = set()
        for memory_id in sorted(derived, key=str):
            memory = uow.load(memory_id, Memory, "memory")
            if memory_id in done or memory.erased_by is not None:
                continue
            sources = ",".join(sorted(str(m) for m in derived[memory_id]))
            seen.append(seen_version(memory))
            versions = memory.erase(decision_id=decision_id, principal_id=uow.caller.principal_id)
            ops.extend(_version_ops(memory, versions, derived_from=sources))
            ops.append({"op": "erase_memory", "memory_id": str(memory.id), "derived_from": sources})
            erased.append(memory)
            done.add(memory_id)
            frontier.add(memory_id)
    return erased, ops, seen


def _erase_merge_texts(
    uow: UnitOfWork, accepted: list[dict[str, str]], decision_id: UUID
) -> list[dict[str, str]]:
    """Erase the text of every merge proposal drawn from a memory that lost content in
    ``accepted``; return the operations (each with the digest of the text)."""
    operations = []
    for proposal in _merge_proposals(uow, sorted(_lost(accepted), key=str)):
        if proposal.erase_text(decision_id=decision_id, principal_id=uow.caller.principal_id):
            assert proposal.content_digest is not None  # erase_text refuses a proposal without
            operations.append(
                {
                    "op": "erase_merge_text",
                    "proposal_id": str(proposal.id),
                    "digest": proposal.content_digest,
                }
            )
    return operations


def _with_what_follows(
    uow: UnitOfWork,
    memories: list[Memory],
    done: tuple[list[dict[str, str]], list[dict[str, str]]],
    dependents: list[UUID],
    decision_id: UUID,
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Return the erasure's accepted operations on ``memories`` and what it saw
    (``done``), with what follows from them: the memories derived from those that
    lost content erased, the reflections and merge texts drawn from any of them
    erased, and the memories linked to them recomputed."""
    derived, following, seen = _erase_derived(uow, done[0], decision_id)
    accepted = [*done[0], *following]
    accepted += redact_reflections(uow, [*memories, *derived], accepted, decision_id)
    accepted += _erase_merge_texts(uow, accepted, decision_id)
    linked = _linked(uow, [m.id for m in derived]) if derived else []
    recomputed = sorted({*dependents, *linked} - {m.id for m in derived}, key=str)
    accepted.extend({"op": "recompute", "memory_id": str(m)} for m in recomputed)
    return accepted, [*done[1], *seen]


def _hold_stranded(uow: UnitOfWork, memory_ids: list[UUID]) -> None:
    """Hold each quarantined memory of ``memory_ids`` (an event of it cannot be read) as
    its readable events left it, after every event the log holds of it: its erasure
    records on that, and loads read it as erased from then on
    (:mod:`palimpsest.projections.store.aggregates`)."""
    unloaded = [i for i in memory_ids if i not in uow.aggregates]
    for stranded in stranded_memories(uow.log, uow.caller.tenant_id, unloaded).values():
        uow.add(stranded)


def decide_erase(uow: UnitOfWork, spec: EraseSpec) -> Item:
    """Erase the named observations and memories and everything formed only from them.

    Raises:
        InvalidInputError: no ids, too many, or a blank reason.
        NotFoundError: an id is not an observation (or memory) of the tenant.
        ConflictError: everything named is erased already, by another request.
    """
    reason = _check(spec)
    observation_ids = sorted(set(spec.observation_ids), key=str)
    named_memory_ids = sorted(set(spec.memory_ids), key=str)
    uow.preload([*observation_ids, *named_memory_ids])
    _hold_stranded(uow, named_memory_ids)
    observations = [uow.load(i, Observation, "observation") for i in observation_ids]
    named = [uow.load(i, Memory, "memory") for i in named_memory_ids]
    citing_ids = [m for m in _citing(uow, observation_ids) if m not in set(named_memory_ids)]
    uow.preload(citing_ids)
    citing = [uow.load(i, Memory, "memory") for i in citing_ids]
    # Whether a version is formed only from erased observations depends on the
    # observations it cites that this request does not name: load those too.
    cited = {e.observation_id for m in citing for v in m.versions for e in v.excerpts}
    uow.preload(sorted(cited - set(observation_ids), key=str))
    dependents = _linked(uow, [*named_memory_ids, *citing_ids])
    principal_id = uow.caller.principal_id

    def take(decision_id: UUID) -> Operations:
        accepted: list[dict[str, str]] = []
        refused: list[dict[str, str]] = []
        seen: list[dict[str, str]] = []
        for observation in observations:
            if observation.erase(decision_id=decision_id, principal_id=principal_id):
                accepted.append(
                    {
                        "op": "erase_observation",
                        "observation_id": str(observation.id),
                        "digest": observation.digest,
                    }
                )
            else:
                refused.append(
                    {
                        "op": "erase_observation",
                        "observation_id": str(observation.id),
                        "reason": f"already erased by decision {observation.erased_by}",
                    }
                )
        for memory in named:
            if memory.erased_by is not None:
                refused.append(
                    {
                        "op": "erase_memory",
                        "memory_id": str(memory.id),
                        "reason": f"already erased by decision {memory.erased_by}",
                    }
                )
                continue
            seen.append(seen_version(memory))
            versions = memory.erase(decision_id=decision_id, principal_id=principal_id)
            accepted.append({"op": "erase_memory", "memory_id": str(memory.id)})
            accepted.extend(_version_ops(memory, versions))
        erased = {o.id for o in observations} | {
            i for i in cited if uow.load(i, Observation, "observation").erased_by is not None
        }
        for memory in citing:
            if memory.erased_by is not None:
                continue
            seen.append(seen_version(memory))
            live = [(v.version_id, {e.observation_id for e in v.excerpts}) for v in memory.versions]
            versions = memory.erase_versions(
                versions_formed_only_from(live, erased),
                decision_id=decision_id,
                principal_id=principal_id,
            )
            accepted.extend(_version_ops(memory, versions))
            if memory.erased_by is not None:
                accepted.append({"op": "erase_memory", "memory_id": str(memory.id)})
                continue
            # Versions that keep other support keep their content; the erased
            # observations' excerpts and support go.
            for version in memory.versions:
                accepted.extend(
                    {
                        "op": "erase_excerpt",
                        "memory_id": str(memory.id),
                        "version_id": str(version.version_id),
                        "digest": e.excerpt_digest,
                    }
                    for e in version.excerpts
                    if e.observation_id in {o.id for o in observations}
                    and version.erased_by is None
                )
            for c in memory.contributions:
                if c.active and c.observation_id in erased:
                    memory.deactivate_contribution(
                        c.contribution_id, decision_id=decision_id, principal_id=principal_id
                    )
                    accepted.append(
                        {
                            "op": "deactivate_contribution",
                            "memory_id": str(memory.id),
                            "contribution_id": str(c.contribution_id),
                        }
                    )
            accepted.append({"op": "recompute", "memory_id": str(memory.id)})
        if accepted:
            accepted, seen = _with_what_follows(
                uow, [*named, *citing], (accepted, seen), dependents, decision_id
            )
        return accepted, refused, seen

    params: DecisionParams = {
        "reason": reason,
        "observation_ids": [str(i) for i in observation_ids],
        "memory_ids": [str(i) for i in named_memory_ids],
    }
    if spec.part_of is not None:
        params["part_of"] = str(spec.part_of)
    return record_decision(
        uow,
        kind="erasure",
        subject="erasure",
        params=params,
        inputs=[
            *({"kind": "observation", "id": str(i)} for i in observation_ids),
            *({"kind": "memory", "id": str(i)} for i in named_memory_ids),
        ],
        take=take,
        nothing_to_do=ConflictError("everything named is erased already"),
        reason=reason,
    )
