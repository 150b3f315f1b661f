"""Proposals for review: open (or decided) verdicts with both memories side by side.

The ``retention_proposals`` read model finds them (by status, action, the
memory's type, newest first); each proposal's details come from its events
(the distribution, what the judge saw), and each memory's current text and
state from the log, so a reviewer sees whether anything changed since the
verdict.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from pydantic import Field

from palimpsest.domain.errors import NotFoundError
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import Proposal
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views._evidence_excerpts import EvidenceExcerpt, evidence_excerpts
from palimpsest.projections.views.listing import ListingCursor, MemoryAttributes
from palimpsest.projections.views.record import Record
from palimpsest.projections.views.version_texts import version_texts

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = [
    "ProposalFilter",
    "ProposalRecord",
    "ProposedMemory",
    "list_proposals",
    "proposal_record",
]


class ProposedMemory(MemoryAttributes):
    """One memory of a proposal, as it is now, and whether it changed since the verdict."""

    version_id: UUID | None = Field(description="Its current version now.")
    content: str | None = Field(description="Its current version's text (None once gone).")
    seen_version_id: UUID | None = Field(description="The version the judge saw.")
    archived: bool
    erased: bool
    changed: bool = Field(
        description="Another version, archived or erased since the verdict: applying "
        "the proposal answers 409 stale-proposal."
    )
    recorded_at: datetime = Field(description="When the memory was first recorded.")
    last_touched_at: datetime = Field(
        description="When anything last happened to it (a version, a label, an archive).",
    )
    evidence: list[EvidenceExcerpt] = Field(
        description="Its current version's cited excerpts, oldest capture first, with "
        "their source (text null once erased or expired).",
    )


class ProposalRecord(Record):
    """A proposal: the verdict, both memories, and what became of it."""

    id: UUID
    status: str
    action: str
    probability: float | None
    distribution: dict[str, float] | None
    model: str
    run_id: UUID
    note: str | None
    policy_version: str
    memory: ProposedMemory
    related: ProposedMemory | None = Field(
        description="The newer memory (supersede) or the other side (conflict)."
    )
    changed: bool = Field(description="Whether either memory changed since the verdict.")
    sources: list[ProposedMemory] = Field(
        default_factory=list,
        description="A merge's memories, the centre first: each is superseded by the "
        "consolidated memory when it is applied (empty for other actions).",
    )
    merged_content: str | None = Field(
        default=None, description="A merge's consolidated text (None for other actions)."
    )
    created_at: datetime
    position: int
    decision_id: UUID | None
    decided_at: datetime | None


class ProposalFilter(Record):
    """Which proposals to list."""

    status: str = "proposed"
    action: str | None = None
    memory_type: str | None = None


def _memory(
    memory: Memory,
    seen: dict[str, str] | None,
    content: str | None,
    evidence: list[EvidenceExcerpt],
) -> ProposedMemory:
    current = None if memory.erased_by is not None else memory.current_version.version_id
    seen_version = UUID(seen["version_id"]) if seen else None
    archived = memory.archived is not None
    erased = memory.erased_by is not None
    return ProposedMemory(
        id=memory.id,
        memory_type=memory.memory_type,
        scope=memory.scope,
        project=memory.project,
        topic=memory.topic,
        version_id=current,
        content=None if erased else content,
        seen_version_id=seen_version,
        archived=archived,
        erased=erased,
        changed=archived or erased or current != seen_version,
        recorded_at=memory.created_on,
        last_touched_at=memory.modified_on,
        evidence=evidence,
    )


def _records(
    log: EventLog, tenant_id: UUID, rows: list[Any], now: datetime | None = None
) -> list[ProposalRecord]:
    proposals = aggregates_of(log, tenant_id, [r["proposal_id"] for r in rows])
    memory_ids = {r["memory_id"] for r in rows} | {
        r["related_memory_id"] for r in rows if r["related_memory_id"]
    }
    for found in proposals.values():
        memory_ids |= {UUID(s["memory_id"]) for s in found.seen if found.action == "merge"}
    memories = aggregates_of(log, tenant_id, sorted(memory_ids, key=str))
    live = {m.id: m.current_version.version_id for m in memories.values() if m.erased_by is None}
    texts = version_texts(log, tenant_id, live)
    evidence = evidence_excerpts(
        log,
        tenant_id,
        [m for m in memories.values() if isinstance(m, Memory)],
        now=now or datetime.now(UTC),
    )
    records = []
    for row in rows:
        proposal = proposals[row["proposal_id"]]
        assert isinstance(proposal, Proposal)
        seen = {s["memory_id"]: s for s in proposal.seen}

        def side(memory_id: UUID, seen: dict[str, dict[str, str]] = seen) -> ProposedMemory:
            text = texts.get(memory_id)
            return _memory(
                memories[memory_id],
                seen.get(str(memory_id)),
                text.content if text else None,
                evidence.get(memory_id, []),
            )

        memory = side(row["memory_id"])
        related = side(row["related_memory_id"]) if row["related_memory_id"] else None
        sources = (
            [side(UUID(s["memory_id"])) for s in proposal.seen]
            if proposal.action == "merge"
            else []
        )
        records.append(
            ProposalRecord(
                id=proposal.id,
                status=row["status"],
                action=proposal.action,
                probability=proposal.probability,
                distribution=proposal.distribution,
                model=proposal.model,
                run_id=proposal.run_id,
                note=proposal.note,
                policy_version=proposal.policy_version,
                memory=memory,
                related=related,
                changed=memory.changed
                or (related is not None and related.changed)
                or any(s.changed for s in sources),
                sources=sources,
                # A merge's text may repeat an erased source's: never served then (and
                # the erasure that took a source's content deleted it).
                merged_content=None
                if any(s.erased for s in sources) or proposal.text_erased_by is not None
                else _merged_text(log, tenant_id, proposal.content_digest),
                created_at=row["created_at"],
                position=row["position"],
                decision_id=row["decision_id"],
                decided_at=row["decided_at"],
            )
        )
    return records


def _merged_text(log: EventLog, tenant_id: UUID, digest: str | None) -> str | None:
    """Return a merge proposal's text from the payload store (None for other actions,
    or once the bytes are gone)."""
    if digest is None:
        return None
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT content FROM {schema}.payloads WHERE digest = %s", log.datastore.schema
            ),
            (digest,),
        )
        row = cur.fetchone()
    return None if row is None else bytes(row["content"]).decode("utf-8")


_COLUMNS = (
    "SELECT p.proposal_id, p.memory_id, p.related_memory_id, p.status, p.created_at,"
    " p.position, p.decision_id, p.decided_at FROM {schema}.retention_proposals p"
)


def proposal_record(log: EventLog, tenant_id: UUID, proposal_id: UUID) -> ProposalRecord:
    """Return one proposal with both memories as they are now.

    Raises:
        NotFoundError: no such proposal in the tenant.
    """
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(_COLUMNS + " WHERE p.proposal_id = %s", log.datastore.schema),
            (proposal_id,),
        )
        rows = cur.fetchall()
    if not rows:
        msg = f"proposal {proposal_id} not found"
        raise NotFoundError(msg)
    return _records(log, tenant_id, rows)[0]


def list_proposals(
    log: EventLog,
    tenant_id: UUID,
    where: ProposalFilter,
    *,
    limit: int,
    after: ListingCursor | None,
) -> tuple[list[ProposalRecord], ListingCursor | None]:
    """List proposals of one status (open ones by default), newest first, filtered by
    action and by the memory's type; return the page and the next cursor (a
    :class:`ListingCursor` of the last proposal's position and id)."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                _COLUMNS + " JOIN {schema}.memory_index m ON m.tenant_id = p.tenant_id"
                " AND m.memory_id = p.memory_id"
                " WHERE p.status = %(status)s"
                " AND (%(action)s::text IS NULL OR p.action = %(action)s)"
                " AND (%(type)s::text IS NULL OR m.memory_type = %(type)s)"
                " AND (%(position)s::bigint IS NULL"
                "  OR (p.position, p.proposal_id) < (%(position)s, %(id)s::uuid))"
                " ORDER BY p.position DESC, p.proposal_id DESC LIMIT %(limit)s",
                log.datastore.schema,
            ),
            {
                "status": where.status,
                "action": where.action,
                "type": where.memory_type,
                "position": None if after is None else after.position,
                "id": None if after is None else after.memory_id,
                "limit": limit + 1,
            },
        )
        rows = cur.fetchall()
    page = rows[:limit]
    following = None
    if len(rows) > limit:
        following = ListingCursor(page[-1]["position"], page[-1]["proposal_id"])
    return _records(log, tenant_id, page), following
