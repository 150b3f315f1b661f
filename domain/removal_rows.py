"""The rows of what a write keeps or removes: observations' deadlines, expiries,
erasures and retractions, the content digests live versions hold, erased
versions, and a tenant's retention and deletion.

A read model holds them (``observation_deadlines``, ``version_digests``,
``tenant_retention``, ``tenant_deletions``), and the payload store deletes the
bytes nothing live holds any more in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar
from uuid import UUID

from palimpsest.domain.dependency import Row, Rule
from palimpsest.domain.memory import Memory
from palimpsest.domain.observation import Observation
from palimpsest.domain.tenant import Tenant

__all__ = [
    "CapturedObservation",
    "CompletedDeletion",
    "ERASED_VERSION_RULE",
    "ErasedObservation",
    "ErasedVersion",
    "ExpiredObservation",
    "HeldDigest",
    "REMOVAL_RULES",
    "ReleasedDigest",
    "RequestedDeletion",
    "RetentionHours",
    "RetractedObservation",
    "ShortenedDeadline",
]


@dataclass(frozen=True, slots=True)
class CapturedObservation(Row):
    """A captured observation: its content digest, retention deadline, transience."""

    observation_id: UUID
    digest: str
    deadline: datetime
    transient: bool


@dataclass(frozen=True, slots=True)
class ShortenedDeadline(Row):
    """An observation's deadline, moved earlier."""

    observation_id: UUID
    deadline: datetime


@dataclass(frozen=True, slots=True)
class ExpiredObservation(Row):
    """An observation whose bytes the write deletes (its deadline passed)."""

    observation_id: UUID


@dataclass(frozen=True, slots=True)
class ErasedObservation(Row):
    """An observation whose content the write erases (its bytes are deleted with it)."""

    observation_id: UUID


@dataclass(frozen=True, slots=True)
class RetractedObservation(Row):
    """An observation the write retracts as evidence."""

    observation_id: UUID


@dataclass(frozen=True, slots=True)
class HeldDigest(Row):
    """Content a recorded version holds: payloads expiry must keep."""

    digest: str
    memory_id: UUID


@dataclass(frozen=True, slots=True)
class ReleasedDigest(Row):
    """Content no live version of the memory holds any more."""

    digest: str
    memory_id: UUID


@dataclass(frozen=True, slots=True)
class ErasedVersion(Row):
    """A version whose content the write erases: what was drawn from its memory
    (derived memories, reflections, merge texts) must go in the same write, and
    recall's indexes of it with it."""

    memory_id: UUID
    version_id: UUID


@dataclass(frozen=True, slots=True)
class RetentionHours(Row):
    """The (raw, transient) hours a tenant set in the write."""

    one_per_write: ClassVar[bool] = True

    raw_hours: int
    transient_hours: int


@dataclass(frozen=True, slots=True)
class RequestedDeletion(Row):
    """The decision of a tenant deletion the write requests."""

    one_per_write: ClassVar[bool] = True

    decision_id: UUID


@dataclass(frozen=True, slots=True)
class CompletedDeletion(Row):
    """The decision of a tenant deletion the write completes."""

    one_per_write: ClassVar[bool] = True

    decision_id: UUID


def _version(event: Memory.VersionRecorded | Memory.VersionErased) -> tuple[Row, ...]:
    if isinstance(event, Memory.VersionRecorded):
        return (HeldDigest(event.content_digest, event.originator_id),)
    erased = ErasedVersion(event.originator_id, event.version_id)
    if event.release_digest:
        return (erased, ReleasedDigest(event.content_digest, event.originator_id))
    return (erased,)


def _observation(event: Observation.Event) -> tuple[Row, ...]:
    if isinstance(event, Observation.Created):
        return (
            CapturedObservation(
                event.originator_id, event.digest, event.retention_deadline, event.transient
            ),
        )
    if isinstance(event, Observation.Expired):
        return (ExpiredObservation(event.originator_id),)
    if isinstance(event, Observation.Erased):
        return (ErasedObservation(event.originator_id),)
    if isinstance(event, Observation.Retracted):
        return (RetractedObservation(event.originator_id),)
    if isinstance(event, Observation.DeadlineShortened):
        return (ShortenedDeadline(event.originator_id, event.deadline),)
    return ()


def _tenant(event: Tenant.Event) -> tuple[Row, ...]:
    if isinstance(event, Tenant.RetentionSet):
        return (RetentionHours(event.raw_hours, event.transient_hours),)
    if isinstance(event, Tenant.DeletionRequested):
        return (RequestedDeletion(event.decision_id),)
    if isinstance(event, Tenant.Deleted):
        return (CompletedDeletion(event.decision_id),)
    return ()


ERASED_VERSION_RULE = Rule((Memory.VersionRecorded, Memory.VersionErased), _version)

REMOVAL_RULES = (
    ERASED_VERSION_RULE,
    Rule((Observation.Event,), _observation),
    Rule((Tenant.Event,), _tenant),
)
"""The rules that make this module's rows."""
