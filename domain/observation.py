"""The ``Observation`` aggregate: a raw report whose bytes live in the payload store."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from palimpsest.domain.errors import InvalidInputError

__all__ = [
    "Observation",
]


class Observation(Aggregate):
    """A raw report (a conversation turn, a document excerpt, a tool result).

    Its event holds the digest of the bytes, never the bytes: expiry and
    erasure delete the payload row and the log stays as it was.
    """

    TOPIC = "palimpsest:Observation"

    class Created(Aggregate.Created):
        """An observation was captured (``ObservationCaptured``)."""

        TOPIC = "palimpsest:ObservationCaptured"
        tenant_id: UUID
        digest: str
        size_bytes: int
        media_type: str
        source: str | None
        captured_at: datetime
        transient: bool
        retention_deadline: datetime
        principal_id: UUID

    class Expired(Aggregate.Event):
        """The observation's bytes were deleted at its retention deadline
        (``ObservationExpired``); its metadata, digest and cited excerpts remain."""

        TOPIC = "palimpsest:ObservationExpired"
        deadline: datetime
        principal_id: UUID

    class DeadlineShortened(Aggregate.Event):
        """The tenant's shorter retention moved the deadline earlier
        (``ObservationDeadlineShortened``); deadlines never move later."""

        TOPIC = "palimpsest:ObservationDeadlineShortened"
        deadline: datetime
        principal_id: UUID

    class Retracted(Aggregate.Event):
        """The observation was retracted as evidence (``ObservationRetracted``) by a
        decision: its contributions stop counting and it cannot be cited again.
        Its bytes stay readable under their own retention: withdrawal is not erasure."""

        TOPIC = "palimpsest:ObservationRetracted"
        decision_id: UUID
        principal_id: UUID

    class Erased(Aggregate.Event):
        """The observation's content was erased (``ObservationErased``) by an erasure
        decision: its bytes are deleted in the same transaction, and every read of
        them answers with a placeholder naming the decision. Not undoable."""

        TOPIC = "palimpsest:ObservationErased"
        decision_id: UUID
        principal_id: UUID

    erased_by: UUID | None = None
    """The erasure decision, once erased (a class default keeps old snapshots loadable)."""

    @event(Created)
    def __init__(
        self,
        tenant_id: UUID,
        digest: str,
        size_bytes: int,
        media_type: str,
        source: str | None,
        captured_at: datetime,
        transient: bool,
        retention_deadline: datetime,
        principal_id: UUID,
    ) -> None:
        self.tenant_id = tenant_id
        self.digest = digest
        self.size_bytes = size_bytes
        self.media_type = media_type
        self.source = source
        self.captured_at = captured_at
        self.transient = transient
        self.retention_deadline = retention_deadline
        self.principal_id = principal_id

        self.expired = False
        self.retracted_by: UUID | None = None

    def expire(self, *, now: datetime, principal_id: UUID) -> None:
        """Record that the bytes are deleted because the deadline has passed.

        Raises:
            InvalidInputError: already expired, or the deadline is still ahead.
        """
        if self.expired:
            msg = f"observation {self.id} has already expired"
            raise InvalidInputError(msg)
        if now < self.retention_deadline:
            msg = f"observation {self.id} is retained until {self.retention_deadline.isoformat()}"
            raise InvalidInputError(msg)
        self._expired(deadline=self.retention_deadline, principal_id=principal_id)

    @event(Expired)
    def _expired(self, deadline: datetime, principal_id: UUID) -> None:
        self.expired = True

    def retract(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Retract the observation as evidence. Returns False (and records nothing)
        if it was already retracted."""
        if self.retracted_by is not None:
            return False
        self._retracted(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Retracted)
    def _retracted(self, decision_id: UUID, principal_id: UUID) -> None:
        self.retracted_by = decision_id

    def erase(self, *, decision_id: UUID, principal_id: UUID) -> bool:
        """Erase the observation's content. Returns False (and records nothing) if it
        was erased already."""
        if self.erased_by is not None:
            return False
        self._erased(decision_id=decision_id, principal_id=principal_id)
        return True

    @event(Erased)
    def _erased(self, decision_id: UUID, principal_id: UUID) -> None:
        self.erased_by = decision_id

    def shorten_deadline(self, deadline: datetime, *, now: datetime, principal_id: UUID) -> bool:
        """Move the retention deadline earlier, to ``deadline`` or ``now`` if that
        has passed. Returns False (and records nothing) if the observation has
        expired or the deadline would not move earlier."""
        effective = max(deadline, now)
        if self.expired or self.erased_by is not None or effective >= self.retention_deadline:
            return False
        self._deadline_shortened(deadline=effective, principal_id=principal_id)
        return True

    @event(DeadlineShortened)
    def _deadline_shortened(self, deadline: datetime, principal_id: UUID) -> None:
        self.retention_deadline = deadline
