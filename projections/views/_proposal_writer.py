"""The proposals read model, kept in step with the log: recorded proposals
(``retention_proposals``), their decisions, and merge texts an erasure removes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.domain.proposal_rows import (
    PROPOSAL_RULES,
    DecidedProposal,
    ErasedMergeText,
    ProposalRow,
)
from palimpsest.domain.removal_rows import ERASED_VERSION_RULE, ErasedVersion
from palimpsest.projections.store.arrays import UuidArray
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.views._removal_writer import (
    content_lost,
    delete_unheld_bytes,
    drawn_from_erased,
)

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store.table_writers import ReadModelRows


class ProposalWriter(TableWriter):
    """``retention_proposals``, and the bytes of erased merge texts."""

    rules = (*PROPOSAL_RULES, ERASED_VERSION_RULE)
    reads = frozenset({DecidedProposal, ErasedMergeText, ErasedVersion, ProposalRow})

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Index the write's new proposals, move the status of those it decides, and
        delete the merge texts it erases (unless a live observation or version holds
        the same bytes)."""
        rows = found.of(ProposalRow)
        if rows:
            # Each proposal's memories as (proposal, memory) pairs, in order: arrays of
            # one element type, where an array per row would be ragged.
            owners: list[UUID] = []
            sources: list[UUID] = []
            for r in rows:
                owners += [r.proposal_id] * len(r.source_ids)
                sources += r.source_ids
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.retention_proposals (proposal_id, memory_id,"
                    " related_memory_id, action, status, probability, model, run_id,"
                    " created_at, position, source_ids) SELECT i, m, r, a, s, p, mo, ru, c,"
                    " {position}, coalesce((SELECT array_agg(x.source ORDER BY x.n)"
                    " FROM unnest(%b::uuid[], %b::uuid[]) WITH ORDINALITY AS x(owner, source, n)"
                    " WHERE x.owner = t.i), '{{}}') FROM unnest(%b::uuid[], %b::uuid[],"
                    " %b::uuid[], %b::text[], %b::text[], %b::float8[], %b::text[], %b::uuid[],"
                    " %b::timestamptz[]) AS t(i, m, r, a, s, p, mo, ru, c)",
                    schema,
                ),
                (
                    UuidArray(owners),
                    UuidArray(sources),
                    [r.proposal_id for r in rows],
                    [r.memory_id for r in rows],
                    [r.related_memory_id for r in rows],
                    [r.action for r in rows],
                    [r.status for r in rows],
                    [r.probability for r in rows],
                    [r.model for r in rows],
                    [r.run_id for r in rows],
                    [r.created_at for r in rows],
                ),
            )
        for d in found.of(DecidedProposal):
            curs.execute(
                schema_query(
                    "UPDATE {schema}.retention_proposals SET status = %b, decision_id = %b,"
                    " decided_at = %b, decided_position = {position}, effect = %b"
                    " WHERE proposal_id = %b",
                    schema,
                ),
                (d.status, d.decision_id, d.decided_at, d.effect, d.proposal_id),
            )
        delete_unheld_bytes(curs, schema, (e.digest for e in found.of(ErasedMergeText)))

    def check(
        self, curs: Cursor[Any], schema: str, found: Dependencies, loaded: frozenset[UUID]
    ) -> None:
        """Refuse a write that erases a memory's content unless it loaded every merge
        proposal drawn from it (a merge committed after the erasure looked for them
        would otherwise keep the erased text).

        Raises:
            StaleReadError: the write must be built again from fresh aggregates.
        """
        lost = content_lost(found)
        if not lost:
            return
        curs.execute(
            schema_query(
                "SELECT proposal_id FROM {schema}.retention_proposals"
                " WHERE action = 'merge' AND source_ids && %b::uuid[]"
                " AND proposal_id <> ALL(%b::uuid[])",
                schema,
            ),
            (UuidArray(lost), UuidArray(loaded)),
        )
        drawn_from_erased([drawn for (drawn,) in curs.fetchall()])

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Do in memory what :meth:`write` does to the table."""
        proposals = rows["retention_proposals"]
        for p in found.of(ProposalRow):
            proposals[(p.proposal_id,)] = (
                p.memory_id,
                p.related_memory_id,
                p.action,
                p.status,
                p.probability,
                p.model,
                p.run_id,
                p.created_at,
                position,
                None,
                None,
                None,
                None,
                list(p.source_ids),
            )
        for d in found.of(DecidedProposal):
            held = proposals[(d.proposal_id,)]
            proposals[(d.proposal_id,)] = (
                *held[:3],
                d.status,
                *held[4:9],
                d.decision_id,
                d.decided_at,
                position,
                d.effect,
                *held[13:],
            )
