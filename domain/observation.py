"""The ``Observation`` aggregate: a raw report whose bytes live in the payload store."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate, event

__all__ = ["Observation"]


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
