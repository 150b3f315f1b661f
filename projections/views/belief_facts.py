"""What the log records about memories, as the projection function takes it.

Live drains, as-of reads and (later) rebuild and verify all read facts here
and hand them to ``palimpsest.domain.belief.project_belief``, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Annotated, Any, NotRequired
from uuid import UUID

from pydantic import PlainSerializer, SkipValidation, WithJsonSchema
from typing_extensions import TypedDict

from palimpsest.domain.belief import Archival, Belief, EdgeFact, Grade, MemoryFacts
from palimpsest.domain.memory import Memory
from palimpsest.projections.store.aggregates import CURRENT, loaded_with
from palimpsest.projections.store.arrays import UuidArray
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.queued import Answer, QueuingCursor
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.storable import storable
from palimpsest.projections.store.tenancy import queued_transaction, tenant_scope
from palimpsest.projections.views.version_cache import cache_for

__all__ = [
    "Applicability",
    "ArchivedLabel",
    "BeliefDocument",
    "BeliefJson",
    "BeliefLabels",
    "ErasedLabel",
    "PROJECTION_ERROR_CHARS",
    "belief_document",
    "facts_from",
    "facts_of",
    "memory_facts",
    "projection_error",
]

# The belief document is JSON at rest (the ``beliefs.belief`` column) and on the
# wire, so it is typed as JSON: TypedDicts (pydantic needs typing_extensions'
# on Python 3.11), never converted on its way from the database to a response.


class ArchivedLabel(TypedDict):
    """Why a memory is archived: forgotten (``reason`` and ``decision_id``), or
    structurally (``reason`` ``"superseded"``, ``superseded_by`` and ``edge_id``:
    retracting that edge ends it; ``restore`` does not)."""

    reason: str
    decision_id: NotRequired[str]
    superseded_by: NotRequired[str]
    edge_id: NotRequired[str]


class ErasedLabel(TypedDict):
    """The erasure that removed a memory."""

    decision_id: str


class BeliefLabels(TypedDict):
    """A belief's labels: superseded, archived (forgotten or superseded), pinned, erased."""

    superseded_by: list[str]
    archived: ArchivedLabel | None
    pinned: bool
    erased: ErasedLabel | None


class Applicability(TypedDict):
    """Where a belief applies."""

    scope: str
    project: str | None


class BeliefDocument(TypedDict):
    """The JSON form of a belief, as stored in the read model and served."""

    memory_id: str
    current_version_id: str | None
    grade: Grade
    confidence: NotRequired[float]
    """Absent from documents projected before beliefs carried it (read as 1.0)."""
    support: list[str]
    alternatives: list[str]
    labels: BeliefLabels
    applicability: Applicability
    reasons: list[dict[str, str]]


def _as_stored(document: BeliefDocument) -> dict[str, Any]:
    return dict(document)


BeliefJson = Annotated[
    BeliefDocument,
    SkipValidation,
    PlainSerializer(_as_stored, return_type=dict[str, Any]),
    WithJsonSchema({"type": "object", "additionalProperties": True}),
]
"""A belief document in a read's answer: typed for the code, served exactly as
stored (neither validated again nor pruned: ``null`` labels stay in the JSON even
where a response leaves out its own ``null`` fields)."""


def memory_facts(
    log: EventLog, tenant_id: UUID, memory_id: UUID, *, at_position: int | None = None
) -> MemoryFacts | None:
    """Return what the log records about a memory, up to ``at_position`` when given
    (None if the tenant had no such memory then).

    As of a position, the memory is loaded at its version then through the
    repository, which starts from the newest snapshot at or below it: the
    cost is bounded by the snapshot interval, not by the memory's history.
    What a memory was at a version never changes, so it is kept in the
    log's :class:`~palimpsest.projections.views.version_cache.VersionCache` (:func:`cache_for`).
    """
    if at_position is None:
        return facts_of(log, tenant_id, [memory_id]).get(memory_id)
    schema = log.datastore.schema
    with queued_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_query(
                "SELECT max(originator_version) FROM {schema}.palimpsest_events"
                " WHERE originator_id = %s AND notification_id <= %s",
                schema,
            ),
            (memory_id, at_position),
        )
        version = cur.answer()
        links = _queue_links(cur, schema, [memory_id], at_position)
    ((at_version,),) = version.rows  # an aggregate: one row, NULL when none
    if at_version is None:
        return None
    key = (tenant_id, memory_id, int(at_version))
    facts = cache_for(log).get(key)
    if facts is None:
        with tenant_scope(tenant_id):
            memory: object = log.repository.get(memory_id, version=at_version)
        if not isinstance(memory, Memory):
            return None
        facts = facts_from(memory, ())
        cache_for(log).put(key, facts)
    return replace(facts, edges=tuple(_edges(links.rows).get(memory_id, ())))


def _queue_links(cur: QueuingCursor, schema: str, memory_ids: list[UUID], limit: int) -> Answer:
    """Queue the read of the links of ``memory_ids`` recorded at or before ``limit``."""
    cur.execute(
        schema_query(
            "SELECT memory_id, linked_id, kind, outgoing, edge_id, position"
            " FROM {schema}.memory_links WHERE memory_id = ANY(%b::uuid[]) AND position <= %s",
            schema,
        ),
        (UuidArray(memory_ids), limit),
    )
    return cur.answer()


def _edges(links: list[tuple[Any, ...]]) -> dict[UUID, list[EdgeFact]]:
    edges: dict[UUID, list[EdgeFact]] = {}
    for memory_id, linked_id, kind, outgoing, edge_id, position in links:
        edges.setdefault(memory_id, []).append(
            EdgeFact(
                edge_id=edge_id,
                kind=kind,
                source_id=memory_id if outgoing else linked_id,
                target_id=linked_id if outgoing else memory_id,
                position=position,
            )
        )
    return edges


def facts_of(
    log: EventLog, tenant_id: UUID, memory_ids: list[UUID], *, at_position: int | None = None
) -> dict[UUID, MemoryFacts]:
    """Return the facts of several memories, reading the log and the links once each.

    With ``at_position``, only events and links recorded at or before it count:
    the same function then answers what was believed at that point. The reads
    use the per-memory index, so their cost follows the memories, not the log.
    """
    schema = log.datastore.schema
    limit = CURRENT if at_position is None else at_position
    # One snapshot, and one round trip, for the events and the links.
    aggregates, links = loaded_with(
        log, tenant_id, memory_ids, lambda cur: _queue_links(cur, schema, memory_ids, limit), limit
    )
    edges = _edges(links.rows)
    return {
        memory.id: facts_from(memory, edges.get(memory.id, ()))
        for memory in aggregates.values()
        if isinstance(memory, Memory)
    }


def facts_from(memory: Memory, edges: Iterable[EdgeFact]) -> MemoryFacts:
    """Return the projection's input for a memory rebuilt from its events, and the
    edges that touch it (from the dependency rows, or a replay's own)."""
    return MemoryFacts(
        memory_id=memory.id,
        memory_type=memory.memory_type,
        scope=memory.scope,
        project=memory.project,
        topic=memory.topic,
        version_ids=tuple(v.version_id for v in memory.versions),
        contributions=tuple(memory.contributions),
        edges=tuple(edges),
        archived=memory.archived,
        pinned=memory.pinned,
        erased_versions=tuple(v.version_id for v in memory.versions if v.erased_by is not None),
        erased_by=memory.erased_by,
        retracted_edges=frozenset(memory.retracted_edges),
    )


def _archived_label(archival: Archival) -> ArchivedLabel:
    """Return the JSON form of an archival: a forget's reason and decision, or the
    superseding memory and edge of a structural one."""
    label: ArchivedLabel = {"reason": archival.reason}
    if archival.decision_id is not None:
        label["decision_id"] = str(archival.decision_id)
    if archival.superseded_by is not None:
        label["superseded_by"] = str(archival.superseded_by)
    if archival.edge_id is not None:
        label["edge_id"] = str(archival.edge_id)
    return label


def belief_document(belief: Belief) -> BeliefDocument:
    """Return the JSON form of a belief, as stored in the read model and served: its
    text as PostgreSQL can store it (:mod:`palimpsest.projections.store.storable`), so a current
    read and an as-of read of the same belief agree."""
    document: BeliefDocument = {
        "memory_id": str(belief.memory_id),
        "current_version_id": None
        if belief.current_version_id is None
        else str(belief.current_version_id),
        "grade": belief.grade,
        "confidence": belief.confidence,
        "support": [str(c) for c in belief.support],
        "alternatives": [str(m) for m in belief.alternatives],
        "labels": {
            "superseded_by": [str(m) for m in belief.superseded_by],
            "archived": None if belief.archived is None else _archived_label(belief.archived),
            "pinned": belief.pinned,
            "erased": None if belief.erased_by is None else {"decision_id": str(belief.erased_by)},
        },
        "applicability": {"scope": belief.scope, "project": belief.project},
        "reasons": [r.as_dict() for r in belief.reasons],
    }
    return storable(document)


PROJECTION_ERROR_CHARS = 500
"""How much of a projection's error is kept and served."""


def projection_error(error: Exception) -> str:
    """Return why a memory cannot be projected, as stored and served (``Type: message``,
    at most :data:`PROJECTION_ERROR_CHARS` characters PostgreSQL can store)."""
    return storable(f"{type(error).__name__}: {error}"[:PROJECTION_ERROR_CHARS])
