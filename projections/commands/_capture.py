"""Capturing observations: raw reports, their bytes stored apart from their event."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from palimpsest.domain.errors import InvalidInputError
from palimpsest.domain.limits import MAX_OBSERVATION_BYTES, encode_content
from palimpsest.domain.observation import Observation
from palimpsest.domain.retention import retention_deadline
from palimpsest.projections.commands._retention import retention_for
from palimpsest.projections.commands._spec import Batch, WriteSpec
from palimpsest.projections.commands.unit_of_work import Item

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["ObservationSpec"]


@dataclass(frozen=True)
class ObservationSpec(WriteSpec):
    """Capture an observation."""

    role = "writer"
    action = "capture observations"

    content: str
    media_type: str
    source: str | None
    captured_at: datetime | None
    transient: bool

    def apply(self, batch: Batch) -> Item:
        """Capture the observation with the retention deadline it gets now.

        Raises:
            InvalidInputError: the content is too large, or ``captured_at`` is
                further in the future than the clock skew allows.
        """
        uow = batch.uow
        data = encode_content(
            self.content,
            limit_bytes=MAX_OBSERVATION_BYTES,
            what="observation content",
            allow_blank=True,
        )
        received_at = batch.clock()
        captured_at = self.captured_at or received_at
        if captured_at > received_at + batch.policy.clock_skew:
            msg = f"captured_at {captured_at.isoformat()} is in the future"
            raise InvalidInputError(msg)
        if batch.retention is None:  # once per request, however many captures it holds
            batch.retention = retention_for(uow.log, uow.caller.tenant_id, batch.policy)
        raw, transient = batch.retention
        deadline = retention_deadline(
            received_at, transient=self.transient, raw_retention=raw, transient_retention=transient
        )
        observation = Observation(
            tenant_id=uow.caller.tenant_id,
            digest=uow.store_payload(data),
            size_bytes=len(data),
            media_type=self.media_type,
            source=self.source,
            captured_at=captured_at,
            transient=self.transient,
            retention_deadline=deadline,
            principal_id=uow.caller.principal_id,
        )
        uow.add(observation)
        return Item(
            observation.id,
            (observation.id, observation.version),
            {
                "id": str(observation.id),
                "retention_deadline": deadline.isoformat(),
            },
        )
