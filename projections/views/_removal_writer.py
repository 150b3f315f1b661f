"""What a write keeps or removes, kept in step with the log: observations' deadlines,
expiries and erasures (``observation_deadlines``), the content live versions hold
(``version_digests``), a tenant's retention and deletion, the sweeps' due marks, and
the payload bytes nothing live holds any more, deleted in the write's transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

from palimpsest.domain.removal_rows import (
    REMOVAL_RULES,
    CapturedObservation,
    CompletedDeletion,
    ErasedObservation,
    ErasedVersion,
    ExpiredObservation,
    HeldDigest,
    ReleasedDigest,
    RequestedDeletion,
    RetentionHours,
    RetractedObservation,
    ShortenedDeadline,
)
from palimpsest.projections.store.arrays import TextArray, UuidArray
from palimpsest.projections.store.errors import StaleReadError
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.store.work_due import mark_written

if TYPE_CHECKING:
    from collections.abc import Iterable

    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store.sql import Chain
    from palimpsest.projections.store.table_writers import ReadModelRows

_MARK_EXPIRED = (
    "UPDATE {schema}.observation_deadlines SET expired_position = {position}"
    " WHERE observation_id = ANY(%b::uuid[]) RETURNING digest"
)
_MARK_ERASED = (
    "UPDATE {schema}.observation_deadlines SET erased_position = {position}"
    " WHERE observation_id = ANY(%b::uuid[]) RETURNING digest"
)


_WRITTEN = frozenset(
    {
        CapturedObservation,
        CompletedDeletion,
        ErasedObservation,
        ExpiredObservation,
        ReleasedDigest,
        RequestedDeletion,
        RetentionHours,
        ShortenedDeadline,
    }
)
"""The row types :meth:`RemovalWriter.write` acts on (a version's held digest alone,
most writes' only row here, needs none of it)."""

_CHECKED = frozenset({ErasedObservation, ErasedVersion, RetractedObservation})
"""The row types :meth:`RemovalWriter.check` acts on."""


def delete_unheld_bytes(curs: Cursor[Any], schema: str, digests: Iterable[str]) -> None:
    """Delete payload rows of ``digests`` unless something live still holds them.

    The payload store keeps one row per digest, so the bytes stay while another
    observation with the same content has neither expired nor been erased, or a
    live memory version has that exact content.
    """
    wanted = sorted(set(digests))
    if not wanted:
        return
    curs.execute(
        schema_query(
            "DELETE FROM {schema}.payloads p WHERE p.digest = ANY(%b::text[]) AND NOT EXISTS ("
            "  SELECT 1 FROM {schema}.observation_deadlines o WHERE o.digest = p.digest"
            "   AND o.expired_position IS NULL AND o.erased_position IS NULL)"
            " AND NOT EXISTS (SELECT 1 FROM {schema}.version_digests v"
            "  WHERE v.digest = p.digest AND v.released_position IS NULL)",
            schema,
        ),
        (wanted,),
    )


def _mark_gone(
    curs: Cursor[Any], schema: str, mark: LiteralString, observations: list[UUID]
) -> set[str]:
    """Set the position ``mark`` names (:data:`_MARK_EXPIRED` or :data:`_MARK_ERASED`)
    of observations to the write's; return their content digests."""
    curs.execute(schema_query(mark, schema), (observations,))
    return {digest for (digest,) in curs.fetchall()}


class RemovalWriter(TableWriter):
    """Deadlines, expiries, erasures, held content, retention and tenant deletion."""

    rules = REMOVAL_RULES
    reads = frozenset(
        {
            CapturedObservation,
            CompletedDeletion,
            ErasedObservation,
            ErasedVersion,
            ExpiredObservation,
            HeldDigest,
            ReleasedDigest,
            RequestedDeletion,
            RetentionHours,
            RetractedObservation,
            ShortenedDeadline,
        }
    )

    def chain(self, chain: Chain, schema: str, found: Dependencies) -> None:
        """Insert captures' deadlines and the content new versions hold; set retention."""
        captured = found.of(CapturedObservation)
        if captured:
            chain.add(
                schema_query(
                    "INSERT INTO {schema}.observation_deadlines"
                    " (observation_id, digest, deadline, transient)"
                    " SELECT * FROM unnest(%b::uuid[], %b::text[], %b::timestamptz[], %b::bool[])",
                    schema,
                ),
                (
                    [c.observation_id for c in captured],
                    [c.digest for c in captured],
                    [c.deadline for c in captured],
                    [c.transient for c in captured],
                ),
            )
        # Once each: a row proposed twice in one statement would be updated twice.
        held = list(dict.fromkeys((h.digest, h.memory_id) for h in found.of(HeldDigest)))
        if held:
            chain.add(
                schema_query(
                    "INSERT INTO {schema}.version_digests (digest, memory_id)"
                    " SELECT * FROM unnest(%b::text[], %b::uuid[])"
                    # A new version with content the memory once released holds it again.
                    " ON CONFLICT (tenant_id, digest, memory_id) DO UPDATE"
                    " SET released_position = NULL"
                    " WHERE version_digests.released_position IS NOT NULL",
                    schema,
                ),
                (TextArray(d for d, _ in held), UuidArray(m for _, m in held)),
            )
        retention = found.of(RetentionHours)
        if retention:
            chain.add(
                schema_query(
                    "INSERT INTO {schema}.tenant_retention (raw_hours, transient_hours, position)"
                    " VALUES (%s, %s, {position}) ON CONFLICT (tenant_id) DO UPDATE SET"
                    " raw_hours = excluded.raw_hours, transient_hours = excluded.transient_hours,"
                    " position = excluded.position",
                    schema,
                ),
                (retention[-1].raw_hours, retention[-1].transient_hours),
            )

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Move deadlines; record expiries, erasures, released content and tenant
        deletions; delete the bytes they free; mark the sweeps' work due."""
        if _WRITTEN.isdisjoint(found.rows):
            return
        shortened = found.of(ShortenedDeadline)
        if shortened:
            curs.execute(
                schema_query(
                    "UPDATE {schema}.observation_deadlines o SET deadline = u.d"
                    " FROM unnest(%b::uuid[], %b::timestamptz[]) AS u(id, d)"
                    " WHERE o.observation_id = u.id",
                    schema,
                ),
                ([s.observation_id for s in shortened], [s.deadline for s in shortened]),
            )
        gone: set[str] = set()
        expired = found.of(ExpiredObservation)
        if expired:
            gone |= _mark_gone(curs, schema, _MARK_EXPIRED, [e.observation_id for e in expired])
        erased = found.of(ErasedObservation)
        if erased:
            gone |= _mark_gone(curs, schema, _MARK_ERASED, [e.observation_id for e in erased])
        released = found.of(ReleasedDigest)
        if released:
            curs.execute(
                schema_query(
                    "UPDATE {schema}.version_digests v SET released_position = {position}"
                    " FROM unnest(%b::text[], %b::uuid[]) AS r(d, m)"
                    " WHERE v.digest = r.d AND v.memory_id = r.m",
                    schema,
                ),
                ([r.digest for r in released], [r.memory_id for r in released]),
            )
            gone.update(r.digest for r in released)
        delete_unheld_bytes(curs, schema, gone)
        for requested in found.of(RequestedDeletion):
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.tenant_deletions (decision_id, requested_position)"
                    " VALUES (%s, {position})",
                    schema,
                ),
                (requested.decision_id,),
            )
        for completed in found.of(CompletedDeletion):
            curs.execute(
                schema_query(
                    "UPDATE {schema}.tenant_deletions SET completed_position = {position}"
                    " WHERE decision_id = %s",
                    schema,
                ),
                (completed.decision_id,),
            )
        captured = found.of(CapturedObservation)
        deadlines = [c.deadline for c in captured] + [s.deadline for s in shortened]
        # Work due for the sweeps (expiry, retention, deletion): store/work_due.py.
        mark_written(
            curs,
            schema,
            earliest_deadline=min(deadlines) if deadlines else None,
            retention=bool(found.of(RetentionHours)),
            captured=bool(captured),
            deletion=bool(found.of(RequestedDeletion)),
        )

    def check(
        self, curs: Cursor[Any], schema: str, found: Dependencies, loaded: frozenset[UUID]
    ) -> None:
        """Refuse a write that retracts or erases observations unless it loaded every
        memory citing them (a citation committed after the decision looked for
        citations would otherwise keep its support), and one that erases a memory's
        content unless it loaded every memory derived from it.

        Raises:
            StaleReadError: the write must be built again from fresh aggregates.
        """
        if _CHECKED.isdisjoint(found.rows):
            return
        removed = [r.observation_id for r in found.of(RetractedObservation)]
        removed += [e.observation_id for e in found.of(ErasedObservation)]
        if removed:
            curs.execute(
                schema_query(
                    "SELECT DISTINCT memory_id FROM {schema}.evidence_links"
                    " WHERE observation_id = ANY(%b::uuid[]) AND memory_id <> ALL(%b::uuid[])",
                    schema,
                ),
                (removed, list(loaded)),
            )
            unseen = [memory_id for (memory_id,) in curs.fetchall()]
            if unseen:
                msg = f"memories began citing removed observations: {sorted(map(str, unseen))}"
                raise StaleReadError(msg)
        lost = content_lost(found)
        if lost:
            curs.execute(
                schema_query(
                    "SELECT memory_id FROM {schema}.memory_links"
                    " WHERE linked_id = ANY(%b::uuid[]) AND kind = 'derived_from' AND outgoing"
                    " AND memory_id <> ALL(%b::uuid[])",
                    schema,
                ),
                (UuidArray(lost), UuidArray(loaded)),
            )
            drawn_from_erased([drawn for (drawn,) in curs.fetchall()])

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Do in memory what :meth:`chain` and :meth:`write` do to the tables."""
        deadlines = rows["observation_deadlines"]
        for c in found.of(CapturedObservation):
            deadlines[(c.observation_id,)] = (c.digest, c.deadline, None, c.transient, None)
        for h in found.of(HeldDigest):
            rows["version_digests"][(h.digest, h.memory_id)] = (None,)
        retention = found.of(RetentionHours)
        if retention:
            last = retention[-1]
            rows["tenant_retention"][()] = (last.raw_hours, last.transient_hours, position)
        for r in found.of(ReleasedDigest):
            rows["version_digests"][(r.digest, r.memory_id)] = (position,)
        for requested in found.of(RequestedDeletion):
            rows["tenant_deletions"][()] = (requested.decision_id, position, None)
        for _ in found.of(CompletedDeletion):
            decision_id, requested_at, _ = rows["tenant_deletions"][()]
            rows["tenant_deletions"][()] = (decision_id, requested_at, position)
        for s in found.of(ShortenedDeadline):
            digest, _, expired, transient, erased = deadlines[(s.observation_id,)]
            deadlines[(s.observation_id,)] = (digest, s.deadline, expired, transient, erased)
        for e in found.of(ExpiredObservation):
            if (e.observation_id,) in deadlines:
                digest, deadline, _, transient, erased = deadlines[(e.observation_id,)]
                deadlines[(e.observation_id,)] = (digest, deadline, position, transient, erased)
        for x in found.of(ErasedObservation):
            if (x.observation_id,) in deadlines:
                digest, deadline, expired, transient, _ = deadlines[(x.observation_id,)]
                deadlines[(x.observation_id,)] = (digest, deadline, expired, transient, position)


def content_lost(found: Dependencies) -> list[UUID]:
    """Return the memories with a version whose content the write erases: what was
    drawn from them (derived memories, reflections, merge texts) must go in the same
    write."""
    return list(dict.fromkeys(e.memory_id for e in found.of(ErasedVersion)))


def drawn_from_erased(unseen: list[UUID]) -> None:
    """Refuse the write if anything in ``unseen`` (drawn from content it erases) was
    not loaded by it.

    Raises:
        StaleReadError: there is such a thing.
    """
    if unseen:
        msg = f"drawn from erased content since the erasure looked: {sorted(map(str, unseen))}"
        raise StaleReadError(msg)
