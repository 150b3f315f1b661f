"""A tenant's read models in disjoint parts, each replayed apart from the others.

Rebuild and verify replay a tenant in one Python process, so a store holding
one large tenant was replayed on one core however many there were. A
:class:`TenantPart` is one of ``count`` shares of that tenant, which workers
replay side by side from the same log:

- a **memory** belongs to part ``memory_id.bytes[15] % count`` (in SQL,
  ``mod(get_byte(uuid_send(memory_id), 15), count)``: :meth:`TenantPart.owned`),
  with every row keyed by it (:attr:`TableSpec.owner`): its index row, links,
  citations and support, digests, revision, belief and snapshots;
- **everything else** the tenant's log makes (observations, decisions,
  proposals, cycles and the fades they record, reflections, the tenant's
  settings) belongs to part 0.

A part decodes only the events it needs (:meth:`TenantPart.reads`): its
memories' own, every event that is not a memory's when it is part 0, and
each ``EdgeAdded``, whose target's part records the edge's other direction and
marks the target, exactly as a whole replay does. The union of the parts'
rows is then the whole replay's, with one exception the caller handles: a
memory whose event cannot be decoded or applied stops being applied from that
event on, and an edge it adds later must then be ignored by its target's part
too, which cannot know. A part that meets such an event says so
(:attr:`TenantReadModels.unreadable` is not empty) and the tenant is replayed
whole instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any
from uuid import UUID

from eventsourcing.utils import resolve_topic
from psycopg import sql

from palimpsest.domain.dependency import Citation, Dependencies, Link, Support
from palimpsest.domain.memory import Memory

__all__ = ["TenantPart"]


@cache
def _topic_kind(topic: str) -> type | None:
    """The event class ``topic`` names (None: no class; decoding it will fail and say
    why), looked up once per topic."""
    try:
        kind = resolve_topic(topic)
    except Exception:
        return None
    return kind if isinstance(kind, type) else None


def _memory_topic(topic: str) -> bool | None:
    """Whether events of ``topic`` are a memory's (None: the topic names no class)."""
    kind = _topic_kind(topic)
    return None if kind is None else issubclass(kind, Memory.Event)


@dataclass(frozen=True)
class TenantPart:
    """Part ``index`` of ``count`` of one tenant's read models (see the module)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count <= 256:
            msg = f"no part {self.index} of {self.count}"
            raise ValueError(msg)

    def owns(self, memory_id: UUID) -> bool:
        """Whether the memory, and every row keyed by it, belongs to this part."""
        return memory_id.bytes[15] % self.count == self.index

    @property
    def holds_tenant_rows(self) -> bool:
        """Whether the rows no memory keys (observations, decisions, …) belong here."""
        return self.index == 0

    def reads(self, topic: str, originator_id: UUID) -> bool:
        """Whether this part decodes a stored event (before decoding it).

        A topic that names no class is read by the part of the memory the event
        would belong to: decoding it fails there, and the tenant is replayed whole.
        """
        if _memory_topic(topic) is False:
            return self.holds_tenant_rows
        kind = _topic_kind(topic)
        return self.owns(originator_id) or (kind is not None and issubclass(kind, Memory.EdgeAdded))

    def counts(self, topic: str, originator_id: UUID) -> bool:
        """Whether a stored event is this part's own (each event is one part's): what
        progress counts."""
        if _memory_topic(topic) is False:
            return self.holds_tenant_rows
        return self.owns(originator_id)

    def keeps(self, event: Any) -> bool:
        """Whether a decoded event read by :meth:`reads` is applied: all but another
        part's memory's edge that targets none of this part's memories."""
        if isinstance(event, Memory.EdgeAdded) and not self.owns(event.originator_id):
            return self.owns(event.target_id)
        return True

    def own(self, found: Dependencies) -> Dependencies:
        """Return ``found`` with only what this part holds, in place: the memories it
        marks and the links, citations and support keyed by its memories."""
        found.touched = {m for m in found.touched if self.owns(m)}
        for kind in (Link, Citation, Support):
            rows = found.rows.get(kind)
            if rows:
                found.rows[kind] = [r for r in rows if self.owns(r.memory_id)]  # type: ignore[attr-defined]
        return found

    def owned(self, column: str) -> sql.Composable:
        """Return the SQL condition that ``column`` (a memory id) is this part's."""
        return sql.SQL("mod(get_byte(uuid_send({}), 15), {}) = {}").format(
            sql.Identifier(column), sql.Literal(self.count), sql.Literal(self.index)
        )
