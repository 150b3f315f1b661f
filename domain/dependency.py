"""What a write's events make other memories depend on, and the rows they add.

The revision watermark needs, in the transaction that records an event, the
set of memories whose labels that event can change (``Dependencies.touched``).
Three kinds of row let it find them later, and belong to the log itself:
links between memories (edges, stored in both directions, :class:`Link`),
which observations each memory cites (:class:`Citation`) and whose
contributions support it (:class:`Support`).

Every other row a write adds belongs to a feature that keeps a table in step
with the log (the memory index, removals, proposals, cycles, reflections). Such
a feature declares its row types (subclasses of :class:`Row`) and the
rules (:class:`Rule`) that make them from events in a domain module of its own
(``index_rows``, ``removal_rows``, ``proposal_rows``, ``cycle_rows``,
``reflection_rows``); the rows travel in :attr:`Dependencies.rows`, grouped by
type, and the feature's writer reads the types it knows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar
from uuid import UUID

from palimpsest.domain.memory import Memory

__all__ = [
    "Citation",
    "Dependencies",
    "Link",
    "Row",
    "Rule",
    "Rules",
    "Support",
    "dependencies_of",
]

_R = TypeVar("_R", bound="Row")


class Row:
    """A row a write adds beside its events (subclassed by frozen dataclasses)."""

    __slots__ = ()

    one_per_write: ClassVar[bool] = False
    """Whether a write holds at most one row of this type (a tenant's single-valued
    setting): two writes that each hold one cannot share a transaction."""


@dataclass(frozen=True, slots=True)
class Link(Row):
    """One direction of an edge: ``memory_id`` is linked to ``linked_id``."""

    memory_id: UUID
    linked_id: UUID
    kind: str
    outgoing: bool
    """Whether ``memory_id`` is the edge's source."""
    edge_id: UUID


@dataclass(frozen=True, slots=True)
class Citation(Row):
    """A memory cites an observation (a contribution's excerpt)."""

    observation_id: UUID
    memory_id: UUID


@dataclass(frozen=True, slots=True)
class Support(Row):
    """A proposer (and model, or "") contributed to a memory."""

    proposer_id: UUID
    model_id: str
    memory_id: UUID


@dataclass(frozen=True)
class Rule:
    """How events of some classes make rows: ``rows(event)`` for each event that is
    an instance of one of ``events``."""

    events: tuple[type, ...]
    rows: Callable[[Any], Iterable[Row]]


class Rules:
    """Rules (:class:`Rule`, each once), found by event class (cached per class)."""

    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules: tuple[Rule, ...] = tuple(dict.fromkeys(rules))
        self._by_class: dict[type, tuple[Rule, ...]] = {}

    def of(self, kind: type) -> tuple[Rule, ...]:
        """Return the rules that take events of class ``kind``."""
        found = self._by_class.get(kind)
        if found is None:
            found = self._by_class[kind] = tuple(
                r for r in self.rules if issubclass(kind, r.events)
            )
        return found


@dataclass
class Dependencies:
    """The memories one write touches directly, and the rows it adds, by row type."""

    touched: set[UUID] = field(default_factory=set)
    rows: dict[type[Row], list[Row]] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        """Add ``row`` (after the rows of its type already added)."""
        held = self.rows.get(type(row))
        if held is None:
            self.rows[type(row)] = [row]
        else:
            held.append(row)

    def of(self, kind: type[_R]) -> Sequence[_R]:
        """Return the rows of type ``kind``, in the order they were added."""
        return self.rows.get(kind, ())  # type: ignore[return-value]


def _memory_event(found: Dependencies, event: Memory.Event) -> None:
    """Add what a ``Memory`` event makes others depend on: every one touches its
    memory (deactivations, archival, restore, pin, unpin change labels only)."""
    found.touched.add(event.originator_id)
    if isinstance(event, Memory.EdgeAdded):
        found.touched.add(event.target_id)
        found.add(Link(event.originator_id, event.target_id, event.kind, True, event.edge_id))
        found.add(Link(event.target_id, event.originator_id, event.kind, False, event.edge_id))
    elif isinstance(event, Memory.ContributionAdded):
        observation = UUID(str(event.excerpt["observation_id"]))
        found.add(Citation(observation, event.originator_id))
        found.add(Support(event.proposer_id, event.model_id or "", event.originator_id))


_NO_RULES = Rules()


def dependencies_of(events: Iterable[object], rules: Rules = _NO_RULES) -> Dependencies:
    """Return the directly touched memories of ``events``, their links, citations and
    support, and the rows ``rules`` make of them."""
    found = Dependencies()
    for event in events:
        if isinstance(event, Memory.Event):
            _memory_event(found, event)
        for rule in rules.of(type(event)):
            for row in rule.rows(event):
                found.add(row)
    return found
