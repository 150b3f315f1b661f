"""Translation of validated request bodies into write specs.

This is the one place where HTTP models meet the command layer: each route
calls the function for its model (with the ids its path names), and a batch
maps each item by its ``op``. Nothing here dispatches a write: each spec
applies itself (:mod:`palimpsest.projections.commands._spec`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.api._deps import CallerDep
from palimpsest.domain.errors import NotFoundError
from palimpsest.projections.commands.contributions import ContributionSpec
from palimpsest.projections.commands.memory import EdgeRetractSpec
from palimpsest.projections.commands.writer import (
    EdgeSpec,
    EraseSpec,
    EvidenceSpec,
    LabelSpec,
    MemorySpec,
    ObservationSpec,
    Ref,
    RetentionSpec,
    RetractSpec,
    SettleSpec,
    TenantDeletionSpec,
    VersionSpec,
    WithdrawSpec,
    WriteSpec,
)

if TYPE_CHECKING:
    from palimpsest.api.schemas import (
        BatchCreate,
        ContributionsCreate,
        EdgeCreate,
        EdgeRetract,
        ErasureCreate,
        EvidenceIn,
        ForgetCreate,
        LabelChange,
        MemoryCreate,
        ObservationCreate,
        RetentionUpdate,
        RetractCreate,
        TenantDeletion,
        VersionCreate,
        WithdrawCreate,
    )
    from palimpsest.api.schemas._memories import SettleCreate
    from palimpsest.projections.commands.caller import Caller
    from palimpsest.projections.commands.decisions import LabelOp

__all__ = [
    "RoleCheck",
    "batch_specs",
    "contributions_spec",
    "edge_retract_spec",
    "edge_spec",
    "erase_spec",
    "label_spec",
    "memory_spec",
    "observation_spec",
    "requires",
    "retention_spec",
    "retract_spec",
    "settle_spec",
    "tenant_deletion_spec",
    "version_spec",
    "withdraw_spec",
]


class RoleCheck:
    """A route dependency that refuses a caller whose role cannot perform its
    ``kinds`` of write (the writer checks it again).

    Declared on the route, it runs before the body is validated: a caller who may
    not write gets 403 and learns nothing about the body's rules (a 422 would).
    A class, not a closure, so that :mod:`palimpsest.api._plain_requests` can ask it the same
    question without FastAPI.
    """

    def __init__(self, kinds: tuple[type[WriteSpec], ...]) -> None:
        self.kinds = kinds

    def check(self, caller: Caller) -> None:
        """Raise ``PermissionDeniedError`` unless ``caller`` may perform every kind."""
        for kind in self.kinds:
            caller.require(kind.role, kind.action)

    async def __call__(self, caller: CallerDep) -> None:
        self.check(caller)


def requires(*kinds: type[WriteSpec]) -> RoleCheck:
    """Return a route dependency that refuses a caller whose role cannot perform
    ``kinds`` (:class:`RoleCheck`)."""
    return RoleCheck(kinds)


def _id(value: UUID | str) -> UUID | Ref:
    """Return a UUID as is, and ``"$N"`` (a batch reference) as ``Ref(N)``."""
    return value if isinstance(value, UUID) else Ref(int(value[1:]))


def _evidence(items: list[EvidenceIn]) -> tuple[EvidenceSpec, ...]:
    return tuple(EvidenceSpec(_id(e.observation_id), e.start, e.end) for e in items)


def observation_spec(body: ObservationCreate) -> ObservationSpec:
    """Capture ``body`` as an observation."""
    return ObservationSpec(
        body.content, body.media_type, body.source, body.captured_at, body.transient
    )


def memory_spec(body: MemoryCreate, index: int = 0) -> MemorySpec:
    """Create a memory from ``body`` (item ``index`` of a batch)."""
    _refuse_unresolvable(body, index)
    return MemorySpec(
        body.type,
        body.scope,
        body.project,
        body.topic,
        body.content,
        _evidence(body.evidence),
        body.model_id,
        body.trust,
        importance=body.importance,
        supersedes=tuple(body.supersedes),
    )


def version_spec(memory_id: UUID | str, body: VersionCreate, index: int = 0) -> VersionSpec:
    """Record ``body`` as a new version of ``memory_id`` (a UUID or ``"$N"``; ``body``
    is item ``index`` of a batch)."""
    _refuse_unresolvable(body, index)
    return VersionSpec(
        _id(memory_id),
        body.content,
        _evidence(body.evidence),
        body.model_id,
        body.trust,
        # Never a silent revision of an archived memory over the API (issue 44).
        if_archived="restore" if body.restore else "refuse",
    )


def edge_spec(memory_id: UUID | str, body: EdgeCreate, index: int = 0) -> EdgeSpec:
    """Add ``body``'s edge from ``memory_id`` (a UUID or ``"$N"``; ``body`` is item
    ``index`` of a batch)."""
    _refuse_unresolvable(body, index)
    return EdgeSpec(_id(memory_id), body.kind, _id(body.target_id), body.reason)


def edge_retract_spec(memory_id: UUID, edge_id: UUID, body: EdgeRetract) -> EdgeRetractSpec:
    """Retract edge ``edge_id`` of ``memory_id`` (its source)."""
    return EdgeRetractSpec(memory_id, edge_id, body.reason)


def contributions_spec(memory_id: UUID, body: ContributionsCreate) -> ContributionSpec:
    """Add ``body``'s evidence as support for a version of ``memory_id``."""
    _refuse_unresolvable(body, 0)
    return ContributionSpec(
        memory_id, body.version_id, _evidence(body.evidence), body.model_id, body.trust
    )


def settle_spec(memory_id: UUID, other_id: UUID, body: SettleCreate) -> SettleSpec:
    """Settle the potential conflict between ``memory_id`` and ``other_id``."""
    return SettleSpec(memory_id, other_id, body.resolution, body.reason)


def retract_spec(observation_id: UUID, body: RetractCreate) -> RetractSpec:
    """Retract ``observation_id`` as evidence."""
    return RetractSpec(observation_id, body.reason)


def withdraw_spec(
    proposer_id: UUID | None, model_id: str | None, body: WithdrawCreate
) -> WithdrawSpec:
    """Withdraw a proposer's contributions, a model's (named in the path or the
    body), or a proposer's made with a model."""
    return WithdrawSpec(proposer_id, model_id or body.model, body.reason)


def label_spec(memory_id: UUID, op: LabelOp, body: ForgetCreate | LabelChange) -> LabelSpec:
    """Forget, restore, pin or unpin ``memory_id``."""
    return LabelSpec(memory_id, op, body.reason)


def retention_spec(body: RetentionUpdate) -> RetentionSpec:
    """Set the tenant's retention."""
    return RetentionSpec(body.raw_hours, body.transient_hours)


def erase_spec(body: ErasureCreate) -> EraseSpec:
    """Erase the observations and memories ``body`` names."""
    return EraseSpec(tuple(body.observation_ids), tuple(body.memory_ids), body.reason)


def tenant_deletion_spec(body: TenantDeletion) -> TenantDeletionSpec:
    """Delete the caller's tenant."""
    return TenantDeletionSpec(body.reason)


# Each batch item is its single-write endpoint's body plus ``op`` (and the
# ``memory_id`` that endpoint takes from its path).
_BATCH_OPS: dict[str, Callable[[Any, int], WriteSpec]] = {
    "create_observation": lambda item, _: observation_spec(item),
    "create_memory": memory_spec,
    "add_version": lambda item, index: version_spec(item.memory_id, item, index),
    "add_edge": lambda item, index: edge_spec(item.memory_id, item, index),
}


def batch_specs(body: BatchCreate) -> list[WriteSpec]:
    """Return the specs of a batch's items, in order.

    Raises:
        NotFoundError: an item's ``"$N"`` names no earlier item: like an id of
            nothing, it names nothing (the OpenAPI document cannot state the
            rule, so the answer is the one any unknown id gets).
    """
    return [_BATCH_OPS[item.op](item, index) for index, item in enumerate(body.items)]


def _refuse_unresolvable(body: Any, index: int) -> None:
    """Refuse a ``"$N"`` in ``body`` (item ``index`` of its batch; a single write is
    item 0 of its own) that names no earlier item.

    Raises:
        NotFoundError: naming the reference (what an id of nothing answers).
    """
    refs = [getattr(body, field, None) for field in ("memory_id", "target_id")]
    refs += [e.observation_id for e in getattr(body, "evidence", [])]
    for ref in refs:
        if isinstance(ref, str) and int(ref[1:]) >= index:
            where = f"item {index}" if index else "this write"
            msg = f"{where}: {ref} names no earlier item of a batch"
            raise NotFoundError(msg)
