"""Translation of validated request bodies into write specs.

This is the one place where HTTP models meet the command layer: each route
calls the function for its model (with the ids its path names), and a batch
maps each item by its ``op``. Nothing here dispatches a write: each spec
applies itself (:mod:`projections.commands.spec`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from projections.commands.writer import (
    EdgeSpec,
    EraseSpec,
    EvidenceSpec,
    LabelSpec,
    MemorySpec,
    ObservationSpec,
    Ref,
    RetentionSpec,
    RetractSpec,
    TenantDeletionSpec,
    VersionSpec,
    WithdrawSpec,
    WriteSpec,
)

if TYPE_CHECKING:
    from api.schemas import (
        BatchCreate,
        EdgeCreate,
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
    from projections.commands.decisions import LabelOp

__all__ = [
    "batch_specs",
    "edge_spec",
    "erase_spec",
    "label_spec",
    "memory_spec",
    "observation_spec",
    "retention_spec",
    "retract_spec",
    "tenant_deletion_spec",
    "version_spec",
    "withdraw_spec",
]


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


def memory_spec(body: MemoryCreate) -> MemorySpec:
    """Create a memory from ``body``."""
    return MemorySpec(
        body.type,
        body.scope,
        body.project,
        body.topic,
        body.content,
        _evidence(body.evidence),
        body.model_id,
        body.trust,
    )


def version_spec(memory_id: UUID | str, body: VersionCreate) -> VersionSpec:
    """Record ``body`` as a new version of ``memory_id`` (a UUID or ``"$N"``)."""
    return VersionSpec(
        _id(memory_id), body.content, _evidence(body.evidence), body.model_id, body.trust
    )


def edge_spec(memory_id: UUID | str, body: EdgeCreate) -> EdgeSpec:
    """Add ``body``'s edge from ``memory_id`` (a UUID or ``"$N"``)."""
    return EdgeSpec(_id(memory_id), body.kind, _id(body.target_id))


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
_BATCH_OPS: dict[str, Callable[[Any], WriteSpec]] = {
    "create_observation": observation_spec,
    "create_memory": memory_spec,
    "add_version": lambda item: version_spec(item.memory_id, item),
    "add_edge": lambda item: edge_spec(item.memory_id, item),
}


def batch_specs(body: BatchCreate) -> list[WriteSpec]:
    """Return the specs of a batch's items, in order."""
    return [_BATCH_OPS[item.op](item) for item in body.items]
