"""What a person reads beside a memory: its current version's cited excerpts, with source.

An operator judging a memory, or a reviewer deciding a proposal, needs the
words the memory was formed from and where they came from. Each excerpt is
cut from its observation's stored bytes; an erased, expired or retracted
observation shows its source and time with no text (``text`` None).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from uuid import UUID

from pydantic import BaseModel

from palimpsest.domain.judge_state import cut
from palimpsest.domain.observation import Observation
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.views._payloads import payload_contents

if TYPE_CHECKING:
    from collections.abc import Iterable

    from palimpsest.domain.memory import Memory
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["EXCERPT_CHARS", "EvidenceExcerpt", "evidence_excerpts"]

EXCERPT_CHARS = 300
"""Each excerpt's text is cut to this many characters (as a judge's neighbour is)."""


class EvidenceExcerpt(BaseModel):
    """One excerpt a memory's current version cites."""

    observation_id: UUID
    source: str | None
    captured_at: datetime
    text: str | None
    """The cited words, cut to :data:`EXCERPT_CHARS`; None once erased or expired."""


def evidence_excerpts(
    log: EventLog, tenant_id: UUID, memories: Iterable[Memory], *, now: datetime
) -> dict[UUID, list[EvidenceExcerpt]]:
    """Return each memory's current-version excerpts, oldest capture first (an erased
    memory has none)."""
    cited = {m.id: list(m.current_version.excerpts) for m in memories if m.erased_by is None}
    ids = sorted({e.observation_id for excerpts in cited.values() for e in excerpts}, key=str)
    observations = {
        i: o for i, o in aggregates_of(log, tenant_id, ids).items() if isinstance(o, Observation)
    }
    readable = {
        i: o
        for i, o in observations.items()
        if o.erased_by is None and not o.expired and o.retention_deadline > now
    }
    contents = payload_contents(log, tenant_id, sorted({o.digest for o in readable.values()}))
    found: dict[UUID, list[EvidenceExcerpt]] = {}
    for memory_id, excerpts in cited.items():
        shown = []
        for excerpt in excerpts:
            obs = observations.get(excerpt.observation_id)
            if obs is None:
                continue
            data = contents.get(obs.digest) if obs.id in readable else None
            text = None
            if data is not None:
                text = cut(data.decode("utf-8")[excerpt.start : excerpt.end], EXCERPT_CHARS)
            shown.append(
                EvidenceExcerpt(
                    observation_id=obs.id, source=obs.source, captured_at=obs.captured_at, text=text
                )
            )
        found[memory_id] = sorted(shown, key=lambda e: e.captured_at)
    return found
