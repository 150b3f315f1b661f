"""Translation of validated request bodies into write specs."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel

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

__all__ = [
    "to_specs",
]


def _id(value: UUID | str) -> UUID | Ref:
    return value if isinstance(value, UUID) else Ref(int(value[1:]))


def _evidence(items: list[EvidenceIn]) -> tuple[EvidenceSpec, ...]:
    return tuple(EvidenceSpec(_id(e.observation_id), e.start, e.end) for e in items)


def _spec(body: BaseModel, path_ids: dict[str, Any]) -> WriteSpec:
    if isinstance(body, ObservationCreate):
        return ObservationSpec(
            body.content, body.media_type, body.source, body.captured_at, body.transient
        )
    if isinstance(body, MemoryCreate):
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
    if isinstance(body, RetentionUpdate):
        return RetentionSpec(body.raw_hours, body.transient_hours)
    if isinstance(body, RetractCreate):
        return RetractSpec(path_ids["observation_id"], body.reason)
    if isinstance(body, WithdrawCreate):
        return WithdrawSpec(
            path_ids.get("proposer_id"), path_ids.get("model_id") or body.model, body.reason
        )
    if isinstance(body, ErasureCreate):
        return EraseSpec(tuple(body.observation_ids), tuple(body.memory_ids), body.reason)
    if isinstance(body, TenantDeletion):
        return TenantDeletionSpec(body.reason)
    if isinstance(body, ForgetCreate | LabelChange):
        return LabelSpec(path_ids["memory_id"], path_ids["op"], body.reason)
    memory_id = _id(path_ids.get("memory_id") or body.memory_id)  # type: ignore[attr-defined]
    if isinstance(body, VersionCreate):
        return VersionSpec(
            memory_id, body.content, _evidence(body.evidence), body.model_id, body.trust
        )
    assert isinstance(body, EdgeCreate)
    return EdgeSpec(memory_id, body.kind, _id(body.target_id))


def to_specs(body: BaseModel, path_ids: dict[str, Any]) -> list[WriteSpec]:
    """Return the write specs a request body stands for, in order."""
    if isinstance(body, BatchCreate):
        return [_spec(item, {}) for item in body.items]
    return [_spec(body, path_ids)]
