"""Every read model, recomputed from the log in memory.

``TenantReadModels`` replays one tenant's writes in log order and holds the
rows each read-model table must contain: the dependency rows, the requested
revision of each memory, the decision index, and each memory's belief
computed by the projection function. Rebuild writes these rows; verify
compares them with the live tables; replay prints the beliefs.

It takes the same domain events, the same ``dependencies_of`` and the same
table writers as the write path (:data:`~palimpsest.projections.views.table_writers.VIEW_WRITERS`),
and re-implements in Python only what the recorder's marking SQL and each
writer's SQL do with them (insert-if-absent rows, the marks: each writer's
``replay``). That makes verify a check of two implementations against each
other, not of one with itself.

A memory whose belief cannot be computed (the projection raises on its
events) has no ``beliefs`` row and is not published: its ``revisions`` row
keeps ``published`` at 0 and is quarantined at its requested revision with
the error, as the live drain quarantines it (:meth:`TenantReadModels.unprojectable`
says why; verify lists it).
Text PostgreSQL cannot store is replaced as the live write path and drain
replace it (:mod:`palimpsest.projections.store.storable`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from copy import deepcopy
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import CanMutateAggregate, Snapshot

from palimpsest.domain.belief import ArchiveFact, ContributionFact, EdgeFact, project_belief
from palimpsest.domain.dependency import (
    Citation,
    Dependencies,
    Link,
    Rules,
    Support,
    dependencies_of,
)
from palimpsest.domain.memory import Memory, VersionRecord
from palimpsest.projections.store.eventlog import SNAPSHOT_INTERVAL
from palimpsest.projections.store.storable import storable
from palimpsest.projections.store.table_writers import storable_rows
from palimpsest.projections.store.unreadable import (
    UnreadableEvent,
    UnreadableEventError,
    reason_of,
)
from palimpsest.projections.views.belief_facts import belief_document, facts_from, projection_error
from palimpsest.projections.views.read_model_parts import TenantPart
from palimpsest.projections.views.table_writers import VIEW_WRITERS

__all__ = [
    "TABLES",
    "TableSpec",
    "TenantReadModels",
]


@dataclass(frozen=True)
class TableSpec:
    """A read-model table: its key columns and the log-derived value columns."""

    name: str
    key: tuple[str, ...]
    values: tuple[str, ...]
    owner: str | None = None
    """The key column naming the memory whose part holds a row (None: part 0's
    table, :class:`~palimpsest.projections.views.read_model_parts.TenantPart`)."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Return the key columns followed by the value columns."""
        return self.key + self.values


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "memory_index",
        ("memory_id",),
        ("memory_type", "scope", "project", "topic", "position", "erased_position"),
        "memory_id",
    ),
    TableSpec(
        "memory_links",
        ("memory_id", "edge_id"),
        ("linked_id", "kind", "outgoing", "position"),
        "memory_id",
    ),
    TableSpec("evidence_links", ("observation_id", "memory_id"), ("position",), "memory_id"),
    TableSpec(
        "proposer_links", ("proposer_id", "model_id", "memory_id"), ("position",), "memory_id"
    ),
    TableSpec(
        "observation_deadlines",
        ("observation_id",),
        ("digest", "deadline", "expired_position", "transient", "erased_position"),
    ),
    TableSpec("version_digests", ("digest", "memory_id"), ("released_position",), "memory_id"),
    TableSpec("decision_index", ("decision_id",), ("kind", "logical_key", "position", "part_of")),
    TableSpec(
        "retention_proposals",
        ("proposal_id",),
        (
            "memory_id",
            "related_memory_id",
            "action",
            "status",
            "probability",
            "model",
            "run_id",
            "created_at",
            "position",
            "decision_id",
            "decided_at",
            "decided_position",
            "effect",
            "source_ids",
        ),
    ),
    TableSpec(
        "reflections",
        ("reflection_id",),
        (
            "scope",
            "project",
            "model",
            "content_digest",
            "source_ids",
            "created_at",
            "position",
            "redacted_position",
        ),
    ),
    TableSpec(
        "decay_cycles",
        ("cycle_id",),
        ("snapshot_at", "policy_version", "report", "position", "consolidation"),
    ),
    TableSpec("memory_fades", ("memory_id",), ("cycle_id", "faded_at", "position")),
    TableSpec("tenant_retention", (), ("raw_hours", "transient_hours", "position")),
    TableSpec("tenant_deletions", (), ("decision_id", "requested_position", "completed_position")),
    TableSpec(
        "revisions",
        ("memory_id",),
        ("requested", "published", "unprojectable_at", "unprojectable_error"),
        "memory_id",
    ),
    TableSpec(
        "beliefs",
        ("memory_id",),
        (
            "revision",
            "memory_type",
            "scope",
            "project",
            "topic",
            "current_version_id",
            "grade",
            "belief",
        ),
        "memory_id",
    ),
)
"""Every per-tenant read model. Operational columns (``requested_at``,
``claimed_until``, ``published_at``) say when work happened, not what the log
holds, and are neither rebuilt from nor compared with it."""

Row = tuple[Any, ...]

_UNCHANGING: frozenset[type] = frozenset(
    {type(None), bool, int, float, str, UUID, datetime}
    | {VersionRecord, ContributionFact, ArchiveFact}
)
"""Types whose values never change once made: immutable scalars, and the records a
memory's state holds, frozen dataclasses whose fields hold only immutable values
(``VersionRecord.excerpts`` is a tuple of frozen ``Excerpt``s;
``tests/projections/history/test_rebuild_snapshots.py`` holds them to it)."""


def _snapshot_state(memory: Memory) -> dict[str, Any]:
    """Return the state of a snapshot of ``memory`` now, kept while the replay goes on
    changing the memory.

    A memory changes its lists and its dict in place (a version or a contribution
    appended, an edge set) and rebinds every other attribute, so the state is kept
    by a copy of each list and dict whose items cannot change
    (:data:`_UNCHANGING`), and by a deep copy of any other value. A deep copy of
    everything rebuilt every record: 21 ms for a memory of 500 versions, against
    33 microseconds (CPU, the benchmark store's longest memory).
    """
    state = Snapshot.take(memory).state
    for name, value in state.items():
        kind = type(value)
        if kind in _UNCHANGING:
            continue
        if kind is list and set(map(type, value)) <= _UNCHANGING:
            state[name] = list(value)
        elif kind is dict and set(map(type, [*value, *value.values()])) <= _UNCHANGING:
            state[name] = dict(value)
        else:
            state[name] = deepcopy(value)
    return state


_RULES = Rules(rule for writer in VIEW_WRITERS for rule in writer.rules)
"""The rules of the rows the views' writers read, as the event log's writers use them."""


@dataclass
class TenantReadModels:
    """One tenant's read models, as the log up to :attr:`position` determines them."""

    tenant_id: UUID
    part: TenantPart | None = None
    """The part of the tenant held (None: all of it); the log scan hands it only the
    events the part reads (:meth:`TenantPart.reads`)."""
    position: int = 0
    marked: int = 0
    memories: dict[UUID, Memory] = field(default_factory=dict)
    edges: dict[UUID, list[EdgeFact]] = field(default_factory=dict)
    rows: dict[str, dict[Row, Row]] = field(
        default_factory=lambda: {
            t.name: {} for t in TABLES if t.name not in {"revisions", "beliefs"}
        }
    )
    requested: dict[UUID, int] = field(default_factory=dict)
    computed: dict[UUID, tuple[int, Row | Exception]] = field(default_factory=dict)
    """Each memory's beliefs row (or the projection's error) and the requested revision
    it was computed at; recomputed when the revision moves."""
    snapshots: dict[tuple[UUID, int], dict[str, Any]] = field(default_factory=dict)
    """Snapshot state by (memory id, version): the snapshots the live write path
    takes, at the same versions (after each write that crosses a multiple of
    :data:`~palimpsest.projections.store.eventlog.SNAPSHOT_INTERVAL`)."""

    unreadable: dict[UUID, UnreadableEvent] = field(default_factory=dict)
    """Memories with an event that cannot be decoded or applied (from the log scan, an
    :class:`UnreadableEvent`): not applied from that event on, and quarantined at their
    requested revision, as the live drain quarantines them."""

    def apply_write(self, events: Sequence[Any], position: int) -> set[UUID]:
        """Apply one write (the events of one transaction; ``position`` is its last)
        and return the memories whose requested revision it raised."""
        if not events:  # a write of another part's events only
            self.marked = self.position = position
            return set()
        recorded: dict[UUID, int] = {}
        readable: list[Any] = []
        poisoned: set[UUID] = set()
        memories, unreadable = self.memories, self.unreadable
        for event in events:
            key = event.originator_id
            if isinstance(event, UnreadableEvent):
                unreadable.setdefault(key, event)
            if unreadable and key in unreadable:
                if not self._erase_stranded(event):
                    poisoned.add(key)
                    continue
                recorded[key] = recorded.get(key, 0) + 1
                readable.append(event)
                continue
            held = memories.get(key)  # a memory, never None once held
            if held is not None or isinstance(event, Memory.Created):
                assert isinstance(event, CanMutateAggregate)
                try:
                    memory = event.mutate(held)
                except Exception as error:  # decoded, but it cannot be applied
                    topic = type(event).__qualname__
                    unreadable[key] = UnreadableEvent(
                        key, event.originator_version, topic, "", reason_of(error)
                    )
                    poisoned.add(key)
                    continue
                assert isinstance(memory, Memory)
                memories[key] = memory
                recorded[key] = recorded.get(key, 0) + 1
            readable.append(event)
        for key, count in recorded.items():
            version = self.memories[key].version
            if version // SNAPSHOT_INTERVAL > (version - count) // SNAPSHOT_INTERVAL:
                self.snapshots[(key, version)] = _snapshot_state(self.memories[key])
        found = storable_rows(dependencies_of(readable, _RULES))
        if self.part is not None:
            self.part.own(found)
        self._record_rows(found, position)
        closure = self._closure(found) | {key for key in poisoned if key in self.memories}
        for memory_id in closure:
            self.requested[memory_id] = max(self.requested.get(memory_id, 0), position)
        self.marked = position
        self.position = position
        return closure

    def _erase_stranded(self, event: Any) -> bool:
        """Apply an erasure's event to a memory an unreadable event stranded, as the
        live load does (:mod:`palimpsest.projections.store.aggregates`): whatever the
        memory held, the erasure removes it, and a ``MemoryErased`` ends the quarantine.
        Returns whether the event was applied."""
        key = event.originator_id
        memory = self.memories.get(key)
        if memory is None or not isinstance(event, Memory.VersionErased | Memory.Erased):
            return False
        memory.version = event.originator_version - 1
        try:
            erased = event.mutate(memory)
        except Exception:
            return False
        assert isinstance(erased, Memory)
        self.memories[key] = erased
        if isinstance(event, Memory.Erased):
            del self.unreadable[key]
        return True

    def _record_rows(self, found: Dependencies, position: int) -> None:
        """Insert the write's links, citations and support as the recorder does (first
        one wins), then replay each table writer's rows."""
        rows = self.rows
        for link in found.of(Link):
            if (link.memory_id, link.edge_id) not in rows["memory_links"]:
                rows["memory_links"][(link.memory_id, link.edge_id)] = (
                    link.linked_id,
                    link.kind,
                    link.outgoing,
                    position,
                )
                source, target = (
                    (link.memory_id, link.linked_id)
                    if link.outgoing
                    else (link.linked_id, link.memory_id)
                )
                self.edges.setdefault(link.memory_id, []).append(
                    EdgeFact(link.edge_id, link.kind, source, target, position)
                )
        for c in found.of(Citation):
            rows["evidence_links"].setdefault((c.observation_id, c.memory_id), (position,))
        for s in found.of(Support):
            rows["proposer_links"].setdefault((s.proposer_id, s.model_id, s.memory_id), (position,))
        for writer in VIEW_WRITERS:
            if not writer.reads.isdisjoint(found.rows):
                writer.replay(rows, found, position)

    def _closure(self, found: Dependencies) -> set[UUID]:
        """Return the memories a write marks: those it touches (the recorder's rule)."""
        return set(found.touched)

    def belief_row(self, memory_id: UUID) -> Row:
        """Return the ``beliefs`` value columns for a memory, at its requested revision.

        Raises:
            Exception: whatever the projection raises on the memory's events (see
                :meth:`unprojectable`).
        """
        result = self._computed(memory_id)
        if isinstance(result, Exception):
            raise result
        return result

    def unprojectable(self, memory_id: UUID) -> Exception | None:
        """Return why the memory's belief cannot be computed, or None when it can."""
        result = self._computed(memory_id)
        return result if isinstance(result, Exception) else None

    def _computed(self, memory_id: UUID) -> Row | Exception:
        if memory_id in self.unreadable:
            return UnreadableEventError(self.unreadable[memory_id])
        requested = self.requested[memory_id]
        held = self.computed.get(memory_id)
        if held is None or held[0] != requested:
            try:
                result: Row | Exception = self._project(memory_id)
            except Exception as error:  # the drain quarantines the same failure
                result = error
            held = self.computed[memory_id] = (requested, result)
        return held[1]

    def _project(self, memory_id: UUID) -> Row:
        memory = self.memories[memory_id]
        belief = project_belief(facts_from(memory, self.edges.get(memory_id, ())))
        return (
            self.requested[memory_id],
            *storable((memory.memory_type, memory.scope, memory.project, memory.topic)),
            belief.current_version_id,
            belief.grade,
            belief_document(belief),
        )

    def table_rows(self, name: str) -> Iterator[tuple[Row, Row]]:
        """Yield ``(key, values)`` of every row table ``name`` must hold, caught up."""
        if name == "revisions":
            for memory_id, requested in self.requested.items():
                error = memory_id in self.memories and self.unprojectable(memory_id)
                if error:
                    yield (memory_id,), (requested, 0, requested, projection_error(error))
                else:
                    yield (memory_id,), (requested, requested, None, None)
        elif name == "beliefs":
            for memory_id in self.requested:
                if memory_id in self.memories:
                    row = self._computed(memory_id)
                    if not isinstance(row, Exception):
                        yield (memory_id,), row
        else:
            yield from self.rows[name].items()
