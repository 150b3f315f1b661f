"""Taking decisions: operations that change labels on someone's behalf.

Each decision request is evaluated on the aggregates it affects (loaded
from the log, never from a read model); its effects and its
``DecisionRecorded`` event are recorded in the request's one transaction.
A request that would apply nothing, and repeats the logical decision (see
:func:`palimpsest.domain.decision.logical_key`) that last produced that state, is a
replay: it records nothing and returns the original outcome. Every decision
records the caller's ``reason`` (required for a forget, an erasure and a
tenant deletion, optional elsewhere).

Which memories a withdrawal affects is found through the dependency rows
(``evidence_links``, ``proposer_links``), which are written in the same
transaction as the events they index, then each memory is loaded and
decided on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, LiteralString
from uuid import UUID, uuid4

from palimpsest.domain.decision import POLICY_VERSION, Decision, DecisionParams, logical_key
from palimpsest.domain.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    StructurallyArchivedError,
)
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item, UnitOfWork
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.sql import schema_query, schema_sql
from palimpsest.projections.store.tenancy import queued_transaction, tenant_transaction

__all__ = [
    "LabelSpec",
    "Operations",
    "RetractSpec",
    "WithdrawSpec",
    "decide_label",
    "decide_retract",
    "decide_withdraw",
    "find_decision",
    "given_reason",
    "record_decision",
    "seen_version",
    "superseding_edges",
]

LabelOp = Literal["forget", "restore", "pin", "unpin"]


@dataclass(frozen=True)
class RetractSpec(WriteSpec):
    """Retract an observation as evidence: its contributions stop counting."""

    role = "writer"
    action = "retract observations"

    observation_id: UUID
    reason: str | None

    def apply(self, batch: Batch) -> Item:
        """Retract the observation, as a decision (see :func:`decide_retract`)."""
        return decide_retract(batch.uow, self)


@dataclass(frozen=True)
class WithdrawSpec(WriteSpec):
    """Withdraw a proposer's contributions, or a model's (by any proposer), or a
    proposer's made with one model."""

    role = "writer"
    action = "withdraw contributions"

    proposer_id: UUID | None
    model_id: str | None
    reason: str | None

    def apply(self, batch: Batch) -> Item:
        """Withdraw the contributions, as a decision (see :func:`decide_withdraw`)."""
        return decide_withdraw(batch.uow, self)


@dataclass(frozen=True)
class LabelSpec(WriteSpec):
    """Forget, restore, pin or unpin one memory."""

    role = "writer"
    action = "change labels"

    memory_id: UUID
    op: LabelOp
    reason: str | None

    def apply(self, batch: Batch) -> Item:
        """Change the label, as a decision (see :func:`decide_label`)."""
        return decide_label(batch.uow, self)


Operations = tuple[list[dict[str, str]], list[dict[str, str]], list[dict[str, str]]]
"""What a decision did: accepted operations, refused operations, what it saw."""


def find_decision(log: EventLog, tenant_id: UUID, key: str) -> tuple[UUID, int] | None:
    """Return the newest decision with logical ``key`` and its log position, if any."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT decision_id, position FROM {schema}.decision_index"
                " WHERE logical_key = %s ORDER BY position DESC LIMIT 1",
                log.datastore.schema,
            ),
            (key,),
        )
        row = cur.fetchone()
    return None if row is None else (row["decision_id"], row["position"])


def given_reason(reason: str | None) -> str | None:
    """Return the caller's reason as recorded: stripped, and None when blank."""
    return (reason or "").strip() or None


def record_decision(
    uow: UnitOfWork,
    *,
    kind: str,
    subject: str,
    params: DecisionParams,
    inputs: list[dict[str, str]],
    take: Callable[[UUID], Operations],
    nothing_to_do: ConflictError | None,
    reason: str | None = None,
) -> Item:
    """Evaluate a decision with ``take`` and record it, or replay the original.

    ``take`` receives the new decision's id, applies the accepted operations
    to the unit of work's aggregates, and returns what it accepted, refused
    and saw. ``reason`` (the caller's, if given) is recorded with it; a replay
    answers the original's.

    Raises:
        ConflictError: ``nothing_to_do``, raised when nothing would be applied
            and no earlier identical decision exists; when it is None, such a
            decision is recorded with no operations.
    """
    key = logical_key(kind, subject, params)
    decision_id = uuid4()
    accepted, refused, seen = take(decision_id)
    if not accepted:
        prior = find_decision(uow.log, uow.caller.tenant_id, key)
        if prior is not None:
            decision = uow.load(prior[0], Decision, "decision")
            return Item(
                decision.id,
                None,
                {**decision.outcome(), "replayed": True},
                position=prior[1],
            )
        if nothing_to_do is not None:
            raise nothing_to_do
    decision = Decision(
        id=decision_id,
        tenant_id=uow.caller.tenant_id,
        kind=kind,
        subject=subject,
        params=params,
        logical_key=key,
        inputs=inputs,
        seen=seen,
        accepted=accepted,
        refused=refused,
        proposer_id=uow.caller.principal_id,
        policy_version=POLICY_VERSION,
        principal_id=uow.caller.principal_id,
        reason=given_reason(reason),
    )
    uow.add(decision)
    return Item(
        decision.id, (decision.id, decision.version), {**decision.outcome(), "replayed": False}
    )


def seen_version(memory: Memory) -> dict[str, str]:
    """Return the version and content digest a decision saw of ``memory``."""
    version = memory.current_version
    return {
        "memory_id": str(memory.id),
        "version_id": str(version.version_id),
        "content_digest": version.content_digest,
    }


_CITING: LiteralString = "SELECT memory_id FROM {schema}.evidence_links WHERE observation_id = %s"
_PROPOSED: dict[tuple[bool, bool], LiteralString] = {
    (True, False): "SELECT memory_id FROM {schema}.proposer_links WHERE proposer_id = %s",
    (False, True): "SELECT memory_id FROM {schema}.proposer_links WHERE model_id = %s",
    (True, True): "SELECT memory_id FROM {schema}.proposer_links"
    " WHERE proposer_id = %s AND model_id = %s",
}
"""Memories with contributions by a proposer, a model, or both: keyed by which is named."""


def _linked_memories(
    uow: UnitOfWork, template: LiteralString, params: tuple[Any, ...]
) -> list[UUID]:
    with tenant_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(schema_sql(template, uow.log.datastore.schema), params)
        return sorted({row["memory_id"] for row in cur}, key=str)


def _deactivate(
    uow: UnitOfWork,
    memory_ids: list[UUID],
    matches: Callable[[Any], bool],
    decision_id: UUID,
) -> Operations:
    accepted: list[dict[str, str]] = []
    seen: list[dict[str, str]] = []
    uow.preload(memory_ids)
    for memory_id in memory_ids:
        memory = uow.load(memory_id, Memory, "memory")
        hits = [c for c in memory.contributions if c.active and matches(c)]
        if hits:
            seen.append(seen_version(memory))
        for c in hits:
            memory.deactivate_contribution(
                c.contribution_id, decision_id=decision_id, principal_id=uow.caller.principal_id
            )
            accepted.append(
                {
                    "op": "deactivate_contribution",
                    "memory_id": str(memory.id),
                    "contribution_id": str(c.contribution_id),
                }
            )
    return accepted, [], seen


def decide_retract(uow: UnitOfWork, spec: RetractSpec) -> Item:
    """Retract an observation and deactivate every active contribution citing it."""
    observation = uow.load(spec.observation_id, Observation, "observation")
    memory_ids = _linked_memories(uow, _CITING, (observation.id,))

    def take(decision_id: UUID) -> Operations:
        if not observation.retract(decision_id=decision_id, principal_id=uow.caller.principal_id):
            return [], [], []
        accepted, refused, seen = _deactivate(
            uow, memory_ids, lambda c: c.observation_id == observation.id, decision_id
        )
        return (
            [{"op": "retract_observation", "observation_id": str(observation.id)}, *accepted],
            refused,
            seen,
        )

    return record_decision(
        uow,
        kind="retract_observation",
        subject=f"observation:{observation.id}",
        params={},
        inputs=[{"kind": "observation", "id": str(observation.id)}],
        take=take,
        nothing_to_do=ConflictError(f"observation {observation.id} is already retracted"),
        reason=spec.reason,
    )


def decide_withdraw(uow: UnitOfWork, spec: WithdrawSpec) -> Item:
    """Deactivate every active contribution of a proposer, a model, or both."""
    if spec.proposer_id is None and spec.model_id is None:
        msg = "a withdrawal names a proposer, a model, or both"
        raise InvalidInputError(msg)
    params: list[Any] = []
    inputs: list[dict[str, str]] = []
    if spec.proposer_id is not None:
        params.append(spec.proposer_id)
        inputs.append({"kind": "proposer", "id": str(spec.proposer_id)})
    if spec.model_id is not None:
        params.append(spec.model_id)
        inputs.append({"kind": "model", "id": spec.model_id})
    template = _PROPOSED[spec.proposer_id is not None, spec.model_id is not None]
    memory_ids = _linked_memories(uow, template, tuple(params))
    if not memory_ids:
        # Nothing by them was ever recorded: a decision would only record a no-op
        # forever (and a mistyped id would look withdrawn).
        named = " with ".join(f"{i['kind']} {i['id']}" for i in inputs)
        msg = f"{named} never contributed support in this tenant: nothing to withdraw"
        raise NotFoundError(msg)

    def matches(c: Any) -> bool:
        return (spec.proposer_id is None or c.proposer_id == spec.proposer_id) and (
            spec.model_id is None or c.model_id == spec.model_id
        )

    subject = (
        f"proposer:{spec.proposer_id}" if spec.proposer_id is not None else f"model:{spec.model_id}"
    )
    return record_decision(
        uow,
        kind="withdraw_proposer",
        subject=subject,
        params={}
        if spec.proposer_id is None or spec.model_id is None
        else {"model": spec.model_id},
        inputs=inputs,
        take=lambda decision_id: _deactivate(uow, memory_ids, matches, decision_id),
        nothing_to_do=None,
        reason=spec.reason,
    )


def decide_label(uow: UnitOfWork, spec: LabelSpec) -> Item:
    """Forget, restore, pin or unpin one memory."""
    memory = uow.load(spec.memory_id, Memory, "memory")
    principal_id = uow.caller.principal_id
    reason = given_reason(spec.reason)
    if spec.op == "forget" and reason is None:
        msg = "forget requires a non-blank reason"
        raise InvalidInputError(msg)
    if spec.op == "restore" and memory.archived is None:
        _refuse_structural_restore(uow, memory)

    def take(decision_id: UUID) -> Operations:
        if spec.op == "forget":
            assert reason is not None
            done = memory.forget(reason, decision_id=decision_id, principal_id=principal_id)
        elif spec.op == "restore":
            done = memory.restore(decision_id=decision_id, principal_id=principal_id)
        elif spec.op == "pin":
            done = memory.pin(decision_id=decision_id, principal_id=principal_id)
        else:
            done = memory.unpin(decision_id=decision_id, principal_id=principal_id)
        if not done:
            return [], [], []
        return [{"op": spec.op, "memory_id": str(memory.id)}], [], [seen_version(memory)]

    return record_decision(
        uow,
        kind=spec.op,
        subject=f"memory:{memory.id}",
        params={"reason": reason} if spec.op == "forget" and reason is not None else {},
        inputs=[{"kind": "memory", "id": str(memory.id)}],
        take=take,
        nothing_to_do=ConflictError(_why_not(memory, spec.op)),
        reason=reason,
    )


_SUPERSEDING: LiteralString = (
    "SELECT linked_id, edge_id FROM {schema}.memory_links"
    " WHERE memory_id = %s AND kind = 'supersedes' AND NOT outgoing"
    " ORDER BY position, edge_id"
)


def superseding_edges(uow: UnitOfWork, memory: Memory) -> list[tuple[UUID, UUID]]:
    """Return the live ``supersedes`` edges to ``memory`` as (source, edge id), oldest
    first: from the dependency rows (written with the events they index), less the
    edges the memory itself records as retracted."""
    # One round trip (BEGIN, the query and COMMIT sent whole): every revision of a
    # memory asks this before it writes.
    with queued_transaction(uow.log.datastore, uow.caller.tenant_id, commit=False) as cur:
        cur.execute(schema_query(_SUPERSEDING, uow.log.datastore.schema), (memory.id,))
        answer = cur.answer()
    retracted = set(memory.retracted_edges)
    return [(linked, edge) for linked, edge in answer.rows if edge not in retracted]


def _refuse_structural_restore(uow: UnitOfWork, memory: Memory) -> None:
    """Refuse to restore a memory that is archived by an edge, not by a forget.

    Raises:
        StructurallyArchivedError: a live ``supersedes`` edge points at it.
    """
    edges = superseding_edges(uow, memory)
    if edges:
        source, edge_id = edges[0]
        msg = (
            f"memory {memory.id} is archived because memory {source} supersedes it "
            f"(edge {edge_id}); restore reverses only a forget: retract the edge "
            f"with POST /v1/memories/{source}/edges/{edge_id}/retract"
        )
        raise StructurallyArchivedError(msg)


def _why_not(memory: Memory, op: LabelOp) -> str:
    if op == "forget":
        decision = memory.archived.decision_id if memory.archived else None
        return f"memory {memory.id} is already forgotten (decision {decision})"
    if op == "restore":
        return f"memory {memory.id} is not forgotten; restore reverses only a forget"
    if op == "pin":
        return f"memory {memory.id} is already pinned"
    return f"memory {memory.id} is not pinned"
