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
- ``ReflectionRedacted`` for each reflection drawn from a memory that lost a
  version's content here (its text may repeat what was erased).

The recorder deletes the payload rows in that transaction (unless a live
observation or version holds the same bytes), and raises the revision of
every memory touched, citing, or linked to those: their beliefs are
recomputed by the revision drain. The decision lists every operation with
the digests of what was removed; the receipt sums them.
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
from palimpsest.projections.commands.consolidation import redact_reflections
from palimpsest.projections.commands.decisions import (
    Operations,
    record_decision,
    seen_version,
)
from palimpsest.projections.commands.spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
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


def _version_ops(memory: Memory, versions: list[Any]) -> list[dict[str, str]]:
    ops: list[dict[str, str]] = []
    for record in versions:
        ops.append(
            {
                "op": "erase_version",
                "memory_id": str(memory.id),
                "version_id": str(record.version_id),
                "digest": record.content_digest,
            }
        )
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
        accepted += redact_reflections(uow, [*named, *citing], accepted, decision_id)
        if accepted:
            accepted.extend({"op": "recompute", "memory_id": str(m)} for m in dependents)
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
