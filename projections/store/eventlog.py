"""The event log: the eventsourcing application and its tenant-scoped recorder.

Every insert transaction also writes exactly what must be atomic with the
events: the payload rows they reference, token rows for ``TokenIssued``, the
idempotency record of the request that caused them, and, for a write that
archives memories by proposal or automatically, its reservation of the collapse
guard's allowance (:mod:`palimpsest.projections.store.archival_allowance`).
Nothing else.
"""

from __future__ import annotations

import collections
import dataclasses
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, LiteralString
from uuid import UUID

import psycopg
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, Snapshot
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    DatetimeAsISO,
    DecimalAsStr,
    EventStore,
    IntegrityError,
    InterfaceError,
    JSONTranscoder,
    Mapper,
    Notification,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    Recording,
    StoredEvent,
    UUIDAsHex,
)
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder
from psycopg import sql
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from palimpsest.domain.dependency import Dependencies, dependencies_of
from palimpsest.domain.errors import CollapseGuardError
from palimpsest.domain.memory import Memory
from palimpsest.projections.store.archival_allowance import ArchivalClaim, reserve_archivals
from palimpsest.projections.store.arrays import (
    BoolArray,
    ByteaArray,
    Int8Array,
    TextArray,
    UuidArray,
)
from palimpsest.projections.store.brief_waits import WouldWaitError, brief_limit
from palimpsest.projections.store.errors import DatabaseUnavailableError, StaleReadError
from palimpsest.projections.store.group_conflicts import conflicting
from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.lexeme_counts import counting
from palimpsest.projections.store.pipelined import (
    CommitUnknownError,
    pipelined_transaction,
    told_transaction,
)
from palimpsest.projections.store.queued import Queued, QueuingCursor, UnqueueableError, send_queued
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE
from palimpsest.projections.store.sql import WRITE_POSITION_SETTING, Chain, schema_query
from palimpsest.projections.store.storable import storable
from palimpsest.projections.store.tenancy import current_tenant, set_tenant, tenant_transaction
from palimpsest.projections.store.transcodings import SNAPSHOT_TRANSCODINGS
from palimpsest.projections.store.unknown_commits import recorded_positions, transaction_ended
from palimpsest.projections.store.work_due import mark_written

SNAPSHOT_INTERVAL = 100
"""Events between snapshots of one memory."""

WRITE_ATTEMPTS = 3
"""Tries of one insert transaction that met a lost or refused connection. Each
waits at most ``PALIMPSEST_DB_WAIT_S`` for a connection, so an outage answers a
write within about three times that (it was ten tries of ten seconds)."""


if TYPE_CHECKING:
    from eventsourcing.domain import DomainEventProtocol
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor, Pipeline
    from psycopg.pq.abc import PGresult

    _Compose = Callable[
        [Cursor[Any], Callable[[], Cursor[Any]], Pipeline | None],
        list[tuple[Cursor[Any], Sequence[StoredEvent]]],
    ]
    """What :meth:`TenantScopedRecorder._in_one_round_trip` runs: see there."""

__all__ = [
    "EventLog",
    "GROUPS_AHEAD",
    "GROUP_MAX_EVENTS",
    "GroupCommit",
    "IdempotencyRecord",
    "SERVING_GROUPS_AHEAD",
    "SNAPSHOT_INTERVAL",
    "TenantScopedRecorder",
    "TenantScopedSnapshotRecorder",
    "TokenRow",
    "WRITE_ATTEMPTS",
    "WriteContext",
    "event_mapper",
]

_RETRY_WAIT_S = 0.5
"""The pause before a write is tried again (give or take a tenth, as the library's)."""

_REFUSALS = (IntegrityError, StaleReadError, CollapseGuardError)
"""What refuses a write that, tried again, may be refusing its own earlier commit:
its events' or its idempotency record's unique key, its read check (it changed what
it read), the allowance it took itself."""

_PIPELINE_MAX_EVENTS = 64
"""Largest insert sent in pipeline mode; 2,000 events stalled there every time."""

GROUP_MAX_EVENTS = 64
"""Largest write that joins a group commit (larger ones commit alone), and the
most events one group gathers."""

Positions = Mapping[tuple[UUID, int], int]
"""Log position of each written event, by (aggregate id, aggregate version)."""


_INSERT_EVENTS = (
    "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)"
    " SELECT * FROM unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[])"
    " RETURNING notification_id"
)
"""Stored events as four plain arrays in binary format (see ``_insert_stored_events``)."""

_INSERT_SNAPSHOTS = (
    "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)"
    " SELECT * FROM unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[])"
    " ON CONFLICT DO NOTHING"
)


@lru_cache(maxsize=16)
def _table_query(template: LiteralString, schema: str, table: str) -> bytes:
    """Return ``template`` with ``{schema}`` and ``{table}`` filled in as identifiers,
    rendered once per schema and table (the write path runs these on every save)."""
    return (
        sql.SQL(template)
        .format(schema=sql.Identifier(schema), table=sql.Identifier(table))
        .as_bytes(None)
    )


@lru_cache(maxsize=16)
def _insert_events_query(schema: str, table: str) -> bytes:
    """Return :data:`_INSERT_EVENTS` for ``schema`` and ``table``, answering each
    event's position and recording the write's in the transaction (for
    ``{position}``): the last one the sequence gave this session once the last row
    is in, that is, the insert's highest (under the table lock, nobody else's comes
    between). One statement, where a separate one cost a write as much CPU as
    PostgreSQL takes to run it."""
    return (
        sql.SQL(
            "WITH inserted AS ({insert}) SELECT notification_id,"
            " set_config({setting}, currval({sequence})::text, true) AS position FROM inserted"
        )
        .format(
            insert=sql.SQL(_INSERT_EVENTS).format(
                schema=sql.Identifier(schema), table=sql.Identifier(table)
            ),
            setting=sql.Literal(WRITE_POSITION_SETTING),
            sequence=sql.Literal(
                f"{sql.Identifier(schema).as_string(None)}.{table}_notification_id_seq"
            ),
        )
        .as_bytes(None)
    )


@lru_cache(maxsize=64)
def _select_events_query(
    schema: str, table: str, *, gt: bool, lte: bool, desc: bool, limit: bool
) -> bytes:
    """Return the query of one aggregate's events, with the clauses asked for,
    rendered once per combination."""
    parts: list[sql.Composable] = [
        sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table}"
            " WHERE originator_id = %s"
        ).format(schema=sql.Identifier(schema), table=sql.Identifier(table))
    ]
    if gt:
        parts.append(sql.SQL(" AND originator_version > %s"))
    if lte:
        parts.append(sql.SQL(" AND originator_version <= %s"))
    parts.append(
        sql.SQL(" ORDER BY originator_version DESC" if desc else " ORDER BY originator_version ASC")
    )
    if limit:
        parts.append(sql.SQL(" LIMIT %s"))
    return sql.Composed(parts).as_bytes(None)


def _queued_at(curs: Cursor[Any]) -> int:
    """Return where the statement ``curs`` queued is in its transaction's queue."""
    assert isinstance(curs, QueuingCursor) and curs.index is not None
    return curs.index


def _answered_positions(result: PGresult) -> list[int]:
    """Return the positions :data:`_INSERT_EVENTS` answered in ``result`` (text format)."""
    return [int(result.get_value(row, 0) or b"") for row in range(result.ntuples)]


def _counted(ids: list[int], stored: Sequence[StoredEvent]) -> list[int]:
    """Return ``ids``, the positions an insert of ``stored`` answered.

    Raises:
        ProgrammingError: it answered fewer positions than events.
    """
    if len(ids) != len(stored):
        msg = f"the insert answered {len(ids)} positions for {len(stored)} events"
        raise ProgrammingError(msg)
    return ids


def _queueable(write: WriteContext | None) -> bool:
    """Whether ``write``'s transaction may read no answer before its ``COMMIT`` (it
    checks no read and records no idempotency response), so that it is worth
    composing for :mod:`palimpsest.projections.store.queued` (which finds out for certain)."""
    if write is None:
        return True
    writes = write.members or [write]
    return not write.read_versions and all(
        w.idempotency is None and w.archivals is None for w in writes
    )


def _stored_columns(stored: Sequence[StoredEvent]) -> tuple[list[Any], ...]:
    """Return the columns of ``stored`` for :data:`_INSERT_EVENTS` (and snapshots)."""
    return (
        UuidArray(e.originator_id for e in stored),
        Int8Array(e.originator_version for e in stored),
        TextArray(e.topic for e in stored),
        ByteaArray(e.state for e in stored),
    )


@dataclass(frozen=True)
class TokenRow:
    """A token's lookup row, written with its ``TokenIssued`` event."""

    token_digest: str
    token_id: UUID
    principal_id: UUID
    principal_name: str
    role: str


@dataclass(frozen=True)
class IdempotencyRecord:
    """The request an ``Idempotency-Key`` stands for, and how to render its response."""

    principal_id: UUID
    key: str
    request_digest: str
    status_code: int
    render: Callable[[Positions], dict[str, Any]]


@dataclass
class WriteContext:
    """What one insert transaction writes besides the events."""

    tenant_id: UUID
    payloads: dict[str, bytes] = field(default_factory=dict)
    tokens: list[TokenRow] = field(default_factory=list)
    revoked_tokens: list[str] = field(default_factory=list)
    """Digests of tokens revoked by this write: their lookup rows go with it."""
    idempotency: IdempotencyRecord | None = None
    dependencies: Dependencies | None = None
    response: dict[str, Any] | None = None
    read_versions: dict[UUID, int] = field(default_factory=dict)
    """Aggregates the write read but does not change, at the version it read."""
    loaded: frozenset[UUID] = frozenset()
    """Every aggregate the write read or changed."""
    members: list[WriteContext] = field(default_factory=list)
    """The writes a group commit merged into this one (each with its own
    idempotency record and response); empty for a write of its own."""
    archivals: ArchivalClaim | None = None
    """The memories the write archives that the collapse guard's allowance must hold,
    reserved in its transaction (refused whole if they cannot be). A write with
    one commits alone, never in a group commit: its refusal is its own."""


_MARK_EXPIRED = (
    "UPDATE {schema}.observation_deadlines SET expired_position = {position}"
    " WHERE observation_id = ANY(%b::uuid[]) RETURNING digest"
)
_MARK_ERASED = (
    "UPDATE {schema}.observation_deadlines SET erased_position = {position}"
    " WHERE observation_id = ANY(%b::uuid[]) RETURNING digest"
)


def _mark_gone(
    curs: Cursor[Any], schema: str, mark: LiteralString, observations: list[UUID]
) -> set[str]:
    """Set the position ``mark`` names (:data:`_MARK_EXPIRED` or :data:`_MARK_ERASED`)
    of observations to the write's; return their content digests."""
    curs.execute(schema_query(mark, schema), (observations,))
    return {digest for (digest,) in curs.fetchall()}


def _delete_unheld_bytes(curs: Cursor[Any], schema: str, digests: set[str]) -> None:
    """Delete payload rows of ``digests`` unless something live still holds them.

    The payload store keeps one row per digest, so the bytes stay while another
    observation with the same content has neither expired nor been erased, or a
    live memory version has that exact content.
    """
    if not digests:
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
        (sorted(digests),),
    )


def _record_removals(curs: Cursor[Any], schema: str, found: Dependencies) -> None:
    """Record expiries, erasures and tenant deletions, and delete the bytes they free."""
    gone: set[str] = set()
    if found.expired:
        gone |= _mark_gone(curs, schema, _MARK_EXPIRED, found.expired)
    if found.erased:
        gone |= _mark_gone(curs, schema, _MARK_ERASED, found.erased)
    if found.memories_erased:
        curs.execute(
            schema_query(
                "UPDATE {schema}.memory_index SET erased_position = {position}"
                " WHERE memory_id = ANY(%b::uuid[])",
                schema,
            ),
            (found.memories_erased,),
        )
    if found.released:
        digests, memories = zip(*found.released, strict=True)
        curs.execute(
            schema_query(
                "UPDATE {schema}.version_digests v SET released_position = {position}"
                " FROM unnest(%b::text[], %b::uuid[]) AS r(d, m)"
                " WHERE v.digest = r.d AND v.memory_id = r.m",
                schema,
            ),
            (list(digests), list(memories)),
        )
        gone.update(digests)
    _delete_unheld_bytes(curs, schema, gone)
    if found.versions_erased:
        # Recall's indexes (vectors and words) are derived from the erased content:
        # they go in this transaction too, so no search ever finds what was erased.
        curs.execute(
            schema_query(
                "DELETE FROM {schema}.{embeddings} WHERE version_id = ANY(%b::uuid[])", schema
            ),
            (found.versions_erased,),
        )
        curs.execute(
            schema_query(
                counting(
                    "WITH gone AS (DELETE FROM {schema}.memory_texts"
                    " WHERE version_id = ANY(%b::uuid[]) RETURNING memory_id),"
                    " words AS (DELETE FROM {schema}.memory_lexemes x USING gone"
                    " WHERE x.memory_id = gone.memory_id RETURNING x.lexeme, x.memory_id),"
                    " changes AS (SELECT lexeme, -1 AS change FROM words"
                    " UNION ALL SELECT '', -1 FROM words GROUP BY memory_id)"
                ),
                schema,
            ),
            (found.versions_erased,),
        )
    if found.deletion_requested is not None:
        curs.execute(
            schema_query(
                "INSERT INTO {schema}.tenant_deletions (decision_id, requested_position)"
                " VALUES (%s, {position})",
                schema,
            ),
            (found.deletion_requested,),
        )
    if found.deletion_completed is not None:
        curs.execute(
            schema_query(
                "UPDATE {schema}.tenant_deletions SET completed_position = {position}"
                " WHERE decision_id = %s",
                schema,
            ),
            (found.deletion_completed,),
        )


def _check_reads(curs: Cursor[Any], schema: str, write: WriteContext) -> None:
    """Refuse the transaction if what the write decided from has changed since.

    Runs under the events-table lock, so no other write commits between this
    check and ours. Three things are checked: every aggregate the write only
    read is still at the version it read (a citation must not commit after
    its observation was retracted or erased); a write that retracts or
    erases observations loaded every memory citing them (a citation committed
    after the decision looked for citations would otherwise keep its support);
    and a write that erases a memory's content loaded every memory, merge
    proposal and unredacted reflection drawn from it (a merge committed after
    the erasure looked for them would otherwise keep the erased text).

    Raises:
        StaleReadError: the write must be built again from fresh aggregates.
    """
    if write.read_versions:
        ids = UuidArray(write.read_versions)
        curs.execute(
            schema_query(
                "SELECT originator_id, max(originator_version) AS version"
                " FROM {schema}.{events} WHERE originator_id = ANY(%b::uuid[])"
                " GROUP BY originator_id",
                schema,
            ),
            (ids,),
        )
        changed = [
            originator_id
            for originator_id, version in curs.fetchall()
            if version != write.read_versions[originator_id]
        ]
        if changed:
            msg = f"aggregates changed since they were read: {sorted(map(str, changed))}"
            raise StaleReadError(msg)
    found = write.dependencies
    removed = [] if found is None else [*found.retracted, *found.erased]
    if removed:
        curs.execute(
            schema_query(
                "SELECT DISTINCT memory_id FROM {schema}.evidence_links"
                " WHERE observation_id = ANY(%b::uuid[]) AND memory_id <> ALL(%b::uuid[])",
                schema,
            ),
            (removed, list(write.loaded)),
        )
        unseen = [memory_id for (memory_id,) in curs.fetchall()]
        if unseen:
            msg = f"memories began citing removed observations: {sorted(map(str, unseen))}"
            raise StaleReadError(msg)
    if found is not None and found.content_lost:
        lost, loaded = UuidArray(found.content_lost), UuidArray(write.loaded)
        curs.execute(
            schema_query(
                "SELECT memory_id FROM {schema}.memory_links WHERE linked_id = ANY(%b::uuid[])"
                " AND kind = 'derived_from' AND outgoing AND memory_id <> ALL(%b::uuid[])"
                " UNION ALL SELECT proposal_id FROM {schema}.retention_proposals"
                " WHERE action = 'merge' AND source_ids && %b::uuid[]"
                " AND proposal_id <> ALL(%b::uuid[])"
                " UNION ALL SELECT reflection_id FROM {schema}.reflections"
                " WHERE source_ids && %b::uuid[] AND redacted_position IS NULL"
                " AND reflection_id <> ALL(%b::uuid[])",
                schema,
            ),
            (lost, loaded, lost, loaded, lost, loaded),
        )
        unseen = [drawn for (drawn,) in curs.fetchall()]
        if unseen:
            msg = f"drawn from erased content since the erasure looked: {sorted(map(str, unseen))}"
            raise StaleReadError(msg)


def _record_proposals(curs: Cursor[Any], schema: str, found: Dependencies) -> None:
    """Index the write's new proposals, move the status of those it decides, and delete
    the merge texts it erases (unless a live observation or version holds the same
    bytes)."""
    if found.proposals:
        rows = found.proposals
        # Each proposal's memories as (proposal, memory) pairs, in order: arrays of one
        # element type, where an array per row would be ragged.
        owners: list[UUID] = []
        sources: list[UUID] = []
        for r in rows:
            owners += [r.proposal_id] * len(r.source_ids)
            sources += r.source_ids
        curs.execute(
            schema_query(
                "INSERT INTO {schema}.retention_proposals (proposal_id, memory_id,"
                " related_memory_id, action, status, probability, model, run_id, created_at,"
                " position, source_ids) SELECT i, m, r, a, s, p, mo, ru, c, {position},"
                " coalesce((SELECT array_agg(x.source ORDER BY x.n) FROM unnest(%b::uuid[],"
                " %b::uuid[]) WITH ORDINALITY AS x(owner, source, n) WHERE x.owner = t.i),"
                " '{{}}') FROM unnest(%b::uuid[], %b::uuid[], %b::uuid[], %b::text[],"
                " %b::text[], %b::float8[], %b::text[], %b::uuid[], %b::timestamptz[])"
                " AS t(i, m, r, a, s, p, mo, ru, c)",
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
    for proposal_id, status, decision_id, decided_at, effect in found.proposals_decided:
        curs.execute(
            schema_query(
                "UPDATE {schema}.retention_proposals SET status = %b, decision_id = %b,"
                " decided_at = %b, decided_position = {position}, effect = %b"
                " WHERE proposal_id = %b",
                schema,
            ),
            (status, decision_id, decided_at, effect, proposal_id),
        )
    if found.merge_texts_erased:
        _delete_unheld_bytes(curs, schema, {digest for _, digest in found.merge_texts_erased})


def _record_cycles(curs: Cursor[Any], schema: str, found: Dependencies) -> None:
    """Index the write's decay cycles, set or clear the fade label they decided, and
    record what consolidating a cycle's survivors did."""
    for cycle in found.cycles:
        curs.execute(
            schema_query(
                "INSERT INTO {schema}.decay_cycles (cycle_id, snapshot_at, policy_version,"
                " report, position) VALUES (%b, %b, %b, %b, {position})",
                schema,
            ),
            (
                cycle.cycle_id,
                cycle.snapshot_at,
                cycle.policy_version,
                Jsonb(cycle.report),
            ),
        )
        curs.execute(
            schema_query(
                "INSERT INTO {schema}.memory_fades (memory_id, cycle_id, faded_at, position)"
                " SELECT m, %b, f, {position} FROM unnest(%b::uuid[], %b::timestamptz[]) AS t(m, f)"
                " ON CONFLICT (tenant_id, memory_id) DO UPDATE SET cycle_id = excluded.cycle_id,"
                " faded_at = excluded.faded_at, position = excluded.position",
                schema,
            ),
            (
                cycle.cycle_id,
                [*cycle.faded, *cycle.unfaded],
                [cycle.snapshot_at] * len(cycle.faded) + [None] * len(cycle.unfaded),
            ),
        )
    for cycle_id, summary in found.cycles_consolidated:
        curs.execute(
            schema_query(
                "UPDATE {schema}.decay_cycles SET consolidation = %b WHERE cycle_id = %b",
                schema,
            ),
            (Jsonb(summary), cycle_id),
        )


def _record_reflections(curs: Cursor[Any], schema: str, found: Dependencies) -> None:
    """Index the write's reflections; mark those it redacts and delete their text
    (unless a live observation or version holds the same bytes)."""
    for r in found.reflections:
        curs.execute(
            schema_query(
                "INSERT INTO {schema}.reflections (reflection_id, scope, project, model,"
                " content_digest, source_ids, created_at, position)"
                " VALUES (%b, %b, %b, %b, %b, %b, %b, {position})",
                schema,
            ),
            (
                r.reflection_id,
                r.scope,
                r.project,
                r.model,
                r.content_digest,
                list(r.source_ids),
                r.created_at,
            ),
        )
    if found.reflections_redacted:
        ids, digests = zip(*found.reflections_redacted, strict=True)
        curs.execute(
            schema_query(
                "UPDATE {schema}.reflections SET redacted_position = {position}"
                " WHERE reflection_id = ANY(%b::uuid[])",
                schema,
            ),
            (list(ids),),
        )
        _delete_unheld_bytes(curs, schema, set(digests))


_INSERT_PAYLOADS: LiteralString = (
    "INSERT INTO {schema}.payloads (digest, content, size_bytes)"
    " SELECT d, c, octet_length(c) FROM unnest(%b::text[], %b::bytea[]) AS p(d, c)"
    " ON CONFLICT DO NOTHING"
)
"""Store content by digest, once: a digest held already keeps its row."""


def _payload_columns(payloads: Mapping[str, bytes]) -> tuple[TextArray, ByteaArray]:
    return TextArray(payloads), ByteaArray(payloads.values())


PAYLOADS_UNDER_LOCK_BYTES = 8192
"""The most content a write's payloads may hold to be inserted with its marks, under
the events table's lock (one statement fewer, 33 microseconds of this process):
larger content is sent, compressed and logged before the lock, not while every
other writer waits for it."""


def _payloads_with_marks(write: WriteContext, stored_events: Sequence[StoredEvent]) -> bool:
    """Whether ``write``'s payloads go in its marks' statement (``_mark_for_revision``)
    rather than in a statement of their own before the lock (``_insert_events``)."""
    return (
        bool(write.payloads)
        and bool(stored_events)
        and write.dependencies is not None
        and sum(map(len, write.payloads.values())) <= PAYLOADS_UNDER_LOCK_BYTES
    )


def _mark_for_revision(
    curs: Cursor[Any], schema: str, found: Dependencies, payloads: Mapping[str, bytes]
) -> None:
    """Record dependency rows and raise the requested revision of what can change,
    with the write's ``payloads`` (content by digest) in the same statement.

    Runs inside the transaction that inserts the events, so no reader ever
    sees an event whose requested revision has not been raised. A belief is
    projected from its memory's own events and the edges touching it
    (``domain/belief.py``), so what can change is exactly the memories the
    write records events on and both ends of each edge it adds
    (``Dependencies.touched``): nothing transitive, and nothing for merely
    citing the same observation. The whole transaction is one log position
    for readers, so its last position is each one's new requested revision.
    """
    chain = Chain()
    if payloads:
        chain.add(schema_query(_INSERT_PAYLOADS, schema), _payload_columns(payloads))
    chain.add(
        schema_query(
            "INSERT INTO {schema}.revisions (memory_id, requested)"
            " SELECT unnest(%b::uuid[]), {position}"
            " ON CONFLICT (tenant_id, memory_id) DO UPDATE"
            " SET requested = greatest(revisions.requested, excluded.requested),"
            " requested_at = clock_timestamp()",
            schema,
        ),
        (UuidArray(sorted(found.touched, key=str)),),
    )
    chain.add(
        schema_query(
            "INSERT INTO {schema}.revision_tenants (tenant_id, marked_position)"
            " VALUES ({schema}.current_tenant(), {position}) ON CONFLICT (tenant_id)"
            " DO UPDATE SET marked_position = excluded.marked_position",
            schema,
        )
    )
    if found.links:
        chain.add(
            schema_query(
                "INSERT INTO {schema}.memory_links"
                " (memory_id, linked_id, kind, outgoing, edge_id, position)"
                " SELECT m, l, k, o, e, {position}"
                " FROM unnest(%b::uuid[], %b::uuid[], %b::text[], %b::bool[], %b::uuid[])"
                " AS t(m, l, k, o, e) ON CONFLICT DO NOTHING",
                schema,
            ),
            (
                UuidArray(x.memory_id for x in found.links),
                UuidArray(x.linked_id for x in found.links),
                TextArray(x.kind for x in found.links),
                BoolArray(x.outgoing for x in found.links),
                UuidArray(x.edge_id for x in found.links),
            ),
        )
    if found.evidence:
        observations, memories = zip(*found.evidence, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.evidence_links (observation_id, memory_id, position)"
                " SELECT o, m, {position} FROM unnest(%b::uuid[], %b::uuid[]) AS t(o, m)"
                " ON CONFLICT DO NOTHING",
                schema,
            ),
            (UuidArray(observations), UuidArray(memories)),
        )
    if found.proposers:
        proposers, models, memories = zip(*found.proposers, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.proposer_links (proposer_id, model_id, memory_id, position)"
                " SELECT p, mo, me, {position} FROM unnest(%b::uuid[], %b::text[], %b::uuid[])"
                " AS t(p, mo, me) ON CONFLICT DO NOTHING",
                schema,
            ),
            (UuidArray(proposers), TextArray(models), UuidArray(memories)),
        )
    if found.created:
        ids, types, scopes, projects, topics = zip(*found.created, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.memory_index"
                " (memory_id, memory_type, scope, project, topic, position)"
                " SELECT i, ty, sc, pr, tp, {position}"
                " FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::text[], %b::text[])"
                " AS t(i, ty, sc, pr, tp)",
                schema,
            ),
            (
                UuidArray(ids),
                TextArray(types),
                TextArray(scopes),
                TextArray(projects),
                TextArray(topics),
            ),
        )
    if found.captured:
        ids, digests, deadlines, transient = zip(*found.captured, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.observation_deadlines"
                " (observation_id, digest, deadline, transient)"
                " SELECT * FROM unnest(%b::uuid[], %b::text[], %b::timestamptz[], %b::bool[])",
                schema,
            ),
            (list(ids), list(digests), list(deadlines), list(transient)),
        )
    if found.version_digests:
        digests, memories = zip(*found.version_digests, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.version_digests (digest, memory_id)"
                " SELECT * FROM unnest(%b::text[], %b::uuid[])"
                # A new version with content the memory once released holds it again.
                " ON CONFLICT (tenant_id, digest, memory_id) DO UPDATE SET released_position = NULL"
                " WHERE version_digests.released_position IS NOT NULL",
                schema,
            ),
            (TextArray(digests), UuidArray(memories)),
        )
    if found.decisions:
        ids, kinds, keys, parts = zip(*found.decisions, strict=True)
        chain.add(
            schema_query(
                "INSERT INTO {schema}.decision_index"
                " (decision_id, kind, logical_key, position, part_of)"
                " SELECT d, k, l, {position}, p"
                " FROM unnest(%b::uuid[], %b::text[], %b::text[], %b::uuid[]) AS t(d, k, l, p)",
                schema,
            ),
            (UuidArray(ids), TextArray(kinds), TextArray(keys), UuidArray(parts)),
        )
    if found.retention is not None:
        chain.add(
            schema_query(
                "INSERT INTO {schema}.tenant_retention (raw_hours, transient_hours, position)"
                " VALUES (%s, %s, {position}) ON CONFLICT (tenant_id) DO UPDATE SET"
                " raw_hours = excluded.raw_hours, transient_hours = excluded.transient_hours,"
                " position = excluded.position",
                schema,
            ),
            found.retention,
        )
    # What follows may read what the chain writes (payloads still held, rows to update).
    chain.execute(curs)
    if found.shortened:
        ids, deadlines = zip(*found.shortened, strict=True)
        curs.execute(
            schema_query(
                "UPDATE {schema}.observation_deadlines o SET deadline = u.d"
                " FROM unnest(%b::uuid[], %b::timestamptz[]) AS u(id, d)"
                " WHERE o.observation_id = u.id",
                schema,
            ),
            (list(ids), list(deadlines)),
        )
    _record_proposals(curs, schema, found)
    _record_cycles(curs, schema, found)
    _record_reflections(curs, schema, found)
    _record_removals(curs, schema, found)


class _TenantScopedReads:
    """``select_events`` for one aggregate's rows, as visible to the current tenant."""

    datastore: PostgresDatastore
    events_table_name: str

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Return one aggregate's events (or snapshots), as visible to the current tenant."""
        query = _select_events_query(
            self.datastore.schema,
            self.events_table_name,
            gt=gt is not None,
            lte=lte is not None,
            desc=desc,
            limit=limit is not None,
        )
        params = [p for p in (originator_id, gt, lte, limit) if p is not None]
        with tenant_transaction(self.datastore, current_tenant(), commit=False) as curs:
            curs.execute(query, params)
            return [
                StoredEvent(
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]


class TenantScopedRecorder(_TenantScopedReads, PostgresApplicationRecorder):
    """An application recorder that runs every statement for one tenant.

    Inserts require a ``write=WriteContext`` keyword (passed through
    ``Application.save``): without it there is no tenant, and the events
    table's ``tenant_id`` default is NULL, so the insert fails. Reads of an
    aggregate's events run in a transaction set to :func:`current_tenant`,
    so another tenant's aggregate is simply not found.
    """

    isolated_groups = 0
    """Groups inserted one savepoint per write after the database refused them as one."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events, and what must be atomic with them, in one transaction.

        The library runs these steps in psycopg pipeline mode, which saves
        round trips but stalls in ``sync()`` once a transaction is large
        (1,000 memories, 2,000 events, hung here every time). Small
        transactions keep the pipeline; large ones run as an ordinary
        transaction, where a few more round trips do not matter. A keyword
        ``sent`` is called once a pipelined transaction's one round trip is on its
        way (:meth:`_in_one_round_trip`).

        A lost or refused connection is tried again (:data:`WRITE_ATTEMPTS` tries in
        all), once the write is known not to have committed
        (:meth:`_settle`); a refusal of a try after the first whose events the log
        holds, byte for byte, is that earlier try's commit, answered with their
        positions (:meth:`_tried_again`).

        Raises:
            WouldWaitError: within :func:`~palimpsest.projections.store.brief_waits.briefly`, a
                lock was not had in time, or the database failed and the write is
                known not to have committed (not tried again here, where the caller
                must not wait: it writes again).
        """
        write: WriteContext | None = kwargs.get("write")
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self._insert_once(stored_events, **kwargs)
            except (OperationalError, InterfaceError) as e:
                # (An outcome left unknown is DatabaseUnavailableError, never this.)
                if brief_limit() is not None:
                    waited = isinstance(e.__cause__, psycopg.errors.LockNotAvailable)
                    msg = "a lock the write needs was not had within its brief wait"
                    raise WouldWaitError(msg if waited else f"the write failed: {e}") from e
                if attempt == WRITE_ATTEMPTS:
                    raise
            except _REFUSALS as e:
                if attempt == 1:
                    raise
                (found,) = self._tried_again([(stored_events, write)], [e])
                if isinstance(found, Exception):
                    raise
                return found
            _pause_before_trying_again()
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _insert_once(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        try:
            if 0 < len(stored_events) <= _PIPELINE_MAX_EVENTS:
                return self._insert_pipelined(stored_events, **kwargs)
            return self._insert_plain(stored_events, **kwargs)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            return self._settle(e.__cause__, [(stored_events, kwargs.get("write"))])[0]

    def _insert_plain(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The insert as an ordinary transaction, a round trip per statement.

        Raises:
            OperationalError: caused by :class:`CommitUnknownError` when the connection
                failed once ``COMMIT`` was sent.
        """
        with (
            self.datastore.get_connection() as conn,
            told_transaction(conn),
            conn.cursor(row_factory=tuple_row) as curs,
            conn.cursor(row_factory=tuple_row) as inserted,
        ):
            self._insert_events(curs, stored_events, **kwargs)
            if not stored_events:
                return []
            self._insert_stored_events(inserted, stored_events, **kwargs)
            self._after_insert(curs, inserted, stored_events, None, **kwargs)
            return self._ids(inserted, stored_events, None)

    def _insert_pipelined(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The library's insert, in one round trip when nothing waits for an answer.

        Every statement of the write (the tenant, large payloads, the lock, the
        insert and its position, the dependency rows and marks with small
        payloads) is queued, then ``COMMIT``, and the answers come back together
        (:meth:`_in_one_round_trip`).
        """

        def compose(
            curs: Cursor[Any], new_cursor: Callable[[], Cursor[Any]], pipeline: Pipeline | None
        ) -> list[tuple[Cursor[Any], Sequence[StoredEvent]]]:
            inserted = new_cursor()
            self._insert_events(curs, stored_events, **kwargs)
            self._insert_stored_events(inserted, stored_events, **kwargs)
            self._after_insert(curs, inserted, stored_events, pipeline, **kwargs)
            return [(inserted, stored_events)]

        (ids,) = self._in_one_round_trip(
            compose, queueable=_queueable(kwargs.get("write")), sent=kwargs.get("sent")
        )
        return ids

    def _in_one_round_trip(
        self, compose: _Compose, *, queueable: bool, sent: Callable[[], None] | None = None
    ) -> list[list[int]]:
        """Run the transaction ``compose`` writes, sent in one round trip with its
        ``COMMIT``; return the positions of each insert it answers. ``sent`` is
        called once that round trip is on its way, if it is one (``queueable``).

        ``compose(curs, new_cursor, pipeline)`` executes the statements on ``curs``
        and each events insert on a cursor of its own from ``new_cursor()``, and
        returns those cursors with the events each inserts. If ``queueable``, it
        runs first on queuing cursors, and what it queued is sent by libpq
        directly (:mod:`palimpsest.projections.store.queued`). If it reads an answer within
        the transaction (a check of what the write read, an idempotency record's
        positions, the digests an erasure frees), or is not ``queueable`` (a
        caller that knows it will), it runs in psycopg's pipeline
        (:func:`palimpsest.projections.store.pipelined.pipelined_transaction`), where it
        waits for that answer, and an exception then rolls back.

        Either way the events table's lock is held only while PostgreSQL runs the
        statements, never across a round trip to this process (where a thread may
        wait for the interpreter), because the marks read the write's position in
        PostgreSQL (``{position}`` in :func:`palimpsest.projections.store.sql.schema_sql`). A
        refused statement (a version taken) makes PostgreSQL skip the rest,
        ``COMMIT`` included, and raises when the answers are read.
        """
        with self.datastore.get_connection() as conn:
            if queueable:
                queue: list[Queued] = []
                try:
                    inserts = compose(
                        QueuingCursor(conn, queue), lambda: QueuingCursor(conn, queue), None
                    )
                except UnqueueableError:
                    pass
                else:
                    results = send_queued(conn, queue, sent=sent)
                    return [
                        _counted(_answered_positions(results[_queued_at(c)]), stored)
                        for c, stored in inserts
                    ]
            with conn.cursor(row_factory=tuple_row) as curs:
                cursors: list[Cursor[Any]] = []

                def new_cursor() -> Cursor[Any]:
                    cursors.append(conn.cursor(row_factory=tuple_row))
                    return cursors[-1]

                try:
                    with pipelined_transaction(conn) as pipeline:
                        inserts = compose(curs, new_cursor, pipeline)
                    return [self._ids(c, stored, None) for c, stored in inserts]
                finally:
                    for c in cursors:
                        c.close()

    @cached_property
    def _timeout_statements(self) -> dict[int | None, bytes]:
        """The statement of :meth:`_set_tenant_and_notify`, by brief lock wait (ms)."""
        return {}

    def _tenant_timeout_and_notify(self, brief_ms: int | None) -> bytes:
        found = self._timeout_statements.get(brief_ms)
        if found is None:
            timeout = f"{self.datastore.lock_timeout}s" if brief_ms is None else f"{brief_ms}ms"
            found = self._timeout_statements[brief_ms] = (
                sql.SQL(
                    "SELECT set_config('palimpsest.tenant_id', %s, true),"
                    " set_config('lock_timeout', {timeout}, true), pg_notify({channel}, '')"
                )
                .format(timeout=sql.Literal(timeout), channel=sql.Literal(self.channel_name))
                .as_bytes(None)
            )
        return found

    def _set_tenant_and_notify(self, curs: Cursor[Any], tenant_id: UUID | None) -> None:
        """Set the tenant whose rows follow (none: no rows), the events table lock's
        timeout (``SET LOCAL lock_timeout``, as the library sets it) and ``NOTIFY``
        its channel (delivered at commit: the elected drains listen), in one
        statement: a statement cost a write 33 microseconds of this process's time
        in its pipeline, however little it does."""
        tenant = "" if tenant_id is None else str(tenant_id)
        brief_s = brief_limit()
        # (A limit of 0 would be no limit at all: at least a millisecond.)
        brief_ms = None if brief_s is None else max(1, round(brief_s * 1000))
        curs.execute(self._tenant_timeout_and_notify(brief_ms), (tenant,), prepare=True)

    def _lock(self, curs: Cursor[Any]) -> None:
        """Take the events table's lock as the library does (after
        :meth:`_set_tenant_and_notify` in the same transaction, for its timeout)."""
        curs.execute(self._lock_statement, prepare=True)

    @cached_property
    def _lock_statement(self) -> bytes:
        statement = self.lock_table_statements[-1]
        assert isinstance(statement, sql.Composable)  # the library composes it
        return statement.as_bytes(None)

    def _insert_stored_events(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        """Lock and insert as the library does, but with four plain arrays (after
        :meth:`_insert_events`, which set the lock's timeout and the ``NOTIFY``).

        The library passes one array of a composite type, which psycopg dumps
        element by element in Python; columns of uuid, bigint, text and bytea
        go out as plain arrays in binary format (``%b``), which skips the
        per-element escaping that was the largest single cost of a batch.
        """
        self._lock(curs)
        curs.execute(
            _insert_events_query(self.datastore.schema, self.events_table_name),
            _stored_columns(stored_events),
        )

    def _insert_events(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        write: WriteContext | None = kwargs.get("write")
        self._set_tenant_and_notify(curs, write.tenant_id if write else None)
        if write is None:
            return
        # One statement per table, whatever the batch size: psycopg's pipeline
        # mode can stall on sync() with thousands of queued statements.
        schema = self.datastore.schema
        if write.archivals is not None:
            # Before the events table's lock: writes that archive wait for each
            # other on the allowance's row, not while every writer waits for them.
            reserve_archivals(curs, schema, write.archivals)
        if write.payloads and not _payloads_with_marks(write, stored_events):
            curs.execute(schema_query(_INSERT_PAYLOADS, schema), _payload_columns(write.payloads))
        if write.revoked_tokens:
            curs.execute(
                schema_query(
                    "DELETE FROM {schema}.tokens WHERE token_digest = ANY(%s::text[])", schema
                ),
                (write.revoked_tokens,),
            )
        if write.tokens:
            curs.execute(
                schema_query(
                    "INSERT INTO {schema}.tokens"
                    " (token_digest, token_id, principal_id, principal_name, role)"
                    " SELECT * FROM"
                    " unnest(%s::text[], %s::uuid[], %s::uuid[], %s::text[], %s::text[])",
                    schema,
                ),
                tuple(
                    list(column)
                    for column in zip(
                        *(
                            (t.token_digest, t.token_id, t.principal_id, t.principal_name, t.role)
                            for t in write.tokens
                        ),
                        strict=True,
                    )
                ),
            )

    def _after_insert(
        self,
        curs: Cursor[Any],
        inserted: Cursor[Any],
        stored_events: Sequence[StoredEvent],
        pipeline: Pipeline | None,
        **kwargs: Any,
    ) -> None:
        """Queue what the write records beside its events, after the insert on
        ``inserted``: its position (for ``{position}``), its dependency rows and
        marks; then check what it read and record its idempotency responses, the
        only steps that wait for answers (and only when the write has them)."""
        write: WriteContext | None = kwargs.get("write")
        if write is None:
            return
        schema = self.datastore.schema
        if write.dependencies is not None:
            payloads = write.payloads if _payloads_with_marks(write, stored_events) else {}
            _mark_for_revision(curs, schema, write.dependencies, payloads)
            # Work due for the sweeps (expiry, retention, deletion): store/work_due.py.
            mark_written(curs, schema, write.dependencies)
        _check_reads(curs, schema, write)
        keyed = [w for w in write.members or [write] if w.idempotency is not None]
        if not keyed:
            return
        ids = self._ids(inserted, stored_events, pipeline)
        positions = {
            (as_uuid(e.originator_id), e.originator_version): n
            for e, n in zip(stored_events, ids, strict=True)
        }
        for each in keyed:
            _record_idempotency(curs, schema, each, positions)

    def _ids(
        self, inserted: Cursor[Any], stored_events: Sequence[StoredEvent], pipeline: Pipeline | None
    ) -> list[int]:
        """Return the positions the insert on ``inserted`` gave ``stored_events`` (in
        pipeline mode, waiting for its answer if it has not come yet).

        Raises:
            ProgrammingError: the insert answered fewer positions than events.
        """
        if pipeline is not None and inserted.pgresult is None:
            pipeline.sync()  # sends what is queued, and reads every answer so far
        if inserted.rownumber:
            inserted.scroll(0, mode="absolute")  # read before (for an idempotency record)
        return _counted([int(position) for position, _ in inserted.fetchall()], stored_events)

    def insert_group(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None = None,
    ) -> list[Sequence[int] | Exception]:
        """Insert several writes in one transaction: one lock, one commit, one fsync.

        First as one write per tenant (their rows in one statement per table, as a
        batch is written), in the order the writes came. If the database refuses
        that (one write's version was taken, its ``Idempotency-Key`` used at once
        by another request, a stale read), the transaction rolls back and the
        writes are inserted again one savepoint each (:meth:`_insert_isolated`),
        so the refused one alone fails. A lost connection, or a failed commit,
        fails the whole group, which is tried again once it is known not to have
        committed, as a write alone is (:meth:`insert_events`). ``sent`` is called
        once the group's one round trip is on its way (:meth:`_in_one_round_trip`).

        Returns:
            Per member, in order: its log positions, or the exception that refused it.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                results = self._insert_group_once(members, sent)
            except (OperationalError, InterfaceError):
                if attempt == WRITE_ATTEMPTS:
                    raise
                _pause_before_trying_again()
                continue
            return results if attempt == 1 else self._tried_again(members, results)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _insert_group_once(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None,
    ) -> list[Sequence[int] | Exception]:
        try:
            return self._insert_merged(members, sent)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            return list(self._settle(e.__cause__, members))
        except InterfaceError:
            raise
        except (DatabaseError, StaleReadError, _UnmergeableError):
            self.isolated_groups += 1
            return self._insert_isolated(members)

    def _tried_again(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
        results: Sequence[Sequence[int] | Exception],
    ) -> list[Sequence[int] | Exception]:
        """Return ``results`` (of writes tried again after a lost connection), each
        refusal replaced by its write's positions if the log holds its events, byte
        for byte: an earlier try committed them, and the refusal is that commit's
        unique key, not another writer's win (which would build the write again, with
        new ids, and record it twice). Nothing needs waiting for: the row a unique
        key refuses is committed.

        Raises:
            DatabaseUnavailableError: the log could not be read: the outcome is unknown.
        """
        refused = [i for i, r in enumerate(results) if isinstance(r, _REFUSALS)]
        if not refused:
            return list(results)
        settled = list(results)
        try:
            for i in refused:
                stored, write = members[i]
                found = recorded_positions(
                    self.datastore,
                    self.events_table_name,
                    write.tenant_id if write else None,
                    stored,
                )
                if found is not None:
                    settled[i] = found
        except PersistenceError as e:
            msg = f"a write tried again was refused, and the log could not be read: {e}"
            raise DatabaseUnavailableError(msg) from e
        return settled

    def _settle(
        self,
        error: CommitUnknownError,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
    ) -> list[Sequence[int]]:
        """Return the positions of ``members``' events (the writes of one transaction
        whose connection failed after its ``COMMIT`` was sent) once that transaction
        is over, if it committed (:mod:`palimpsest.projections.store.unknown_commits`).

        Raises:
            OperationalError: it did not commit (trying again is safe).
            DatabaseUnavailableError: it was not over in time, or the database could not
                be asked: nothing is tried again, and the caller learns that the
                outcome is unknown.
        """
        datastore = self.datastore
        unknown = f"a write's outcome is unknown: {error}"
        try:
            # Not retried by this method's caller if it fails: only a write known not
            # to have committed is tried again.
            if not transaction_ended(datastore, error.backend_pid, datastore.lock_timeout + 10.0):
                raise DatabaseUnavailableError(unknown) from error
            table = self.events_table_name
            found = [
                recorded_positions(datastore, table, write.tenant_id if write else None, stored)
                for stored, write in members
            ]
        except PersistenceError as e:
            raise DatabaseUnavailableError(unknown) from e
        if any(positions is None for positions in found):
            msg = f"a write did not commit before its connection failed: {error}"
            raise OperationalError(msg) from error
        return [positions for positions in found if positions is not None]

    def _insert_merged(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None,
    ) -> list[Sequence[int] | Exception]:
        by_tenant: dict[UUID, list[int]] = {}
        for index, (_, write) in enumerate(members):
            by_tenant.setdefault(write.tenant_id, []).append(index)

        def compose(
            curs: Cursor[Any], new_cursor: Callable[[], Cursor[Any]], pipeline: Pipeline | None
        ) -> list[tuple[Cursor[Any], Sequence[StoredEvent]]]:
            inserts: list[tuple[Cursor[Any], Sequence[StoredEvent]]] = []
            for indexes in by_tenant.values():
                write = _merged([members[i][1] for i in indexes])
                stored = [event for i in indexes for event in members[i][0]]
                self._insert_events(curs, stored, write=write)
                if not inserts:  # after the first tenant's settings: the lock's timeout
                    self._lock(curs)
                inserted = new_cursor()
                inserted.execute(
                    _insert_events_query(self.datastore.schema, self.events_table_name),
                    _stored_columns(stored),
                )
                self._after_insert(curs, inserted, stored, pipeline, write=write)
                inserts.append((inserted, stored))
            return inserts

        # One round trip for the whole group, as for one write; every refusal raises
        # when the answers are read, and nothing commits.
        results: list[Sequence[int] | Exception] = [[] for _ in members]
        queueable = all(_queueable(write) for _, write in members)
        inserted = self._in_one_round_trip(compose, queueable=queueable, sent=sent)
        for indexes, ids in zip(by_tenant.values(), inserted, strict=True):
            rest = ids
            for i in indexes:
                count = len(members[i][0])
                results[i], rest = rest[:count], rest[count:]
        return results

    def _insert_isolated(
        self, members: Sequence[tuple[Sequence[StoredEvent], WriteContext]]
    ) -> list[Sequence[int] | Exception]:
        """Insert the writes in one transaction, each in its own savepoint; if the
        connection failed once its ``COMMIT`` was sent, settle what it would have
        committed (the writes not refused) as :meth:`_settle` does."""
        results: list[Sequence[int] | Exception] = []
        try:
            self._insert_each(members, results)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            written = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
            positions = self._settle(e.__cause__, [members[i] for i in written])
            for i, found in zip(written, positions, strict=True):
                results[i] = found
        return results

    def _insert_each(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        results: list[Sequence[int] | Exception],
    ) -> None:
        """Append to ``results`` each write's positions, or its refusal, as its savepoint
        ends; commit them all.

        Raises:
            OperationalError: caused by :class:`CommitUnknownError` when the connection
                failed once ``COMMIT`` was sent.
        """
        with (
            self.datastore.get_connection() as conn,
            conn.pipeline() as pipeline,  # round trips only where a result is needed
            told_transaction(conn),
            conn.cursor(row_factory=tuple_row) as curs,
        ):
            self._set_tenant_and_notify(curs, None)  # each write sets its own, below
            self._lock(curs)
            for stored, write in members:
                try:
                    with (
                        conn.transaction(),  # a savepoint
                        conn.cursor(row_factory=tuple_row) as inserted,
                    ):
                        self._insert_events(curs, stored, write=write)
                        inserted.execute(
                            _insert_events_query(self.datastore.schema, self.events_table_name),
                            _stored_columns(stored),
                        )
                        self._after_insert(curs, inserted, stored, pipeline, write=write)
                        pipeline.sync()  # a refused statement raises here, in its savepoint
                        ids = self._ids(inserted, stored, pipeline)
                except (psycopg.OperationalError, psycopg.InterfaceError):
                    raise
                except psycopg.Error as e:
                    results.append(_refusal(e))
                except StaleReadError as e:
                    results.append(e)
                else:
                    results.append(ids)


def _record_idempotency(
    curs: Cursor[Any], schema: str, write: WriteContext, positions: Positions
) -> None:
    """Render the write's response from its positions and record it under its
    ``Idempotency-Key``. A concurrent request with the same key loses here with
    a unique violation, and its events roll back with it."""
    record = write.idempotency
    assert record is not None
    write.response = record.render(positions)
    curs.execute(
        schema_query(
            "INSERT INTO {schema}.idempotency_keys"
            " (principal_id, key, request_digest, status_code, response)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING 1",
            schema,
        ),
        (
            record.principal_id,
            record.key,
            record.request_digest,
            record.status_code,
            Jsonb(write.response),
        ),
    )
    curs.fetchone()


class _UnmergeableError(Exception):
    """Writes that cannot be recorded as one (two set the same single-valued row)."""


def _merged(writes: list[WriteContext]) -> WriteContext:
    """Return one tenant's writes as one write: what each inserts, side by side.

    Raises:
        _UnmergeableError: two of them set the same single-valued thing (a tenant's
            retention, its deletion): they are inserted one savepoint each instead.
    """
    if len(writes) == 1:
        return writes[0]
    merged = WriteContext(tenant_id=writes[0].tenant_id, members=writes)
    found = [w.dependencies for w in writes if w.dependencies is not None]
    for write in writes:
        merged.payloads.update(write.payloads)
        merged.tokens += write.tokens
        merged.revoked_tokens += write.revoked_tokens
        # Two that read one aggregate at different versions cannot both be
        # current: the check under the lock refuses the group, which is retried.
        merged.read_versions.update(write.read_versions)
    merged.loaded = frozenset().union(*(w.loaded for w in writes))
    merged.dependencies = _merged_dependencies(found) if found else None
    return merged


def _merged_dependencies(found: list[Dependencies]) -> Dependencies:
    merged = Dependencies()
    for f in dataclasses.fields(Dependencies):
        values = [getattr(d, f.name) for d in found]
        first = getattr(merged, f.name)
        if isinstance(first, list):
            setattr(merged, f.name, [item for value in values for item in value])
        elif isinstance(first, set):
            setattr(merged, f.name, set().union(*values))
        else:
            given = [value for value in values if value is not None]
            if len(given) > 1:
                raise _UnmergeableError(f.name)
            setattr(merged, f.name, given[0] if given else None)
    return merged


def _pause_before_trying_again() -> None:
    """Wait before a write is tried again, jittered: writes failed together (an outage)
    do not all try again at the same moment."""
    time.sleep(_RETRY_WAIT_S * random.uniform(0.95, 1.05))


def _refusal(error: psycopg.Error) -> Exception:
    """Return the event store's exception for a database refusal of one write (as
    ``PostgresDatastore.get_connection`` translates it for a write alone)."""
    if isinstance(error, psycopg.IntegrityError):
        return IntegrityError(str(error))
    if isinstance(error, psycopg.DataError):
        return DataError(str(error))
    return DatabaseError(str(error))


_COMMITTED_ENTRIES = 10_000
"""How many aggregates' last committed versions a group commit remembers (about a
megabyte): enough for the aggregates written within a retry's time."""


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass
class _Member:
    """One write waiting in a group commit, and, once done, its outcome.

    ``wake`` is held from the start; releasing it wakes this write's thread, once:
    when its group has committed, or when it is to lead the next group.
    """

    stored: Sequence[StoredEvent]
    write: WriteContext
    ids: Sequence[int] = ()
    error: BaseException | None = None
    done: bool = False
    wake: threading.Lock = field(default_factory=_held_lock)


GROUPS_AHEAD = 3
"""The most groups of one process sent and not yet answered while the next is led:
PostgreSQL runs the first, and the others wait for the events table's lock behind
it. Measured with 8 clients of the library (docs/benchmarks.md, "Groups sent
ahead"): 3 and 4 wrote more than 0 and 2; 8 less than 3, its groups smaller."""

SERVING_GROUPS_AHEAD = 0
""":data:`GROUPS_AHEAD` in a serving process (``palimpsest serve``): its Python, not
the lock, is what its writes wait for, and writes sent ahead go in smaller groups,
each a transaction's work more; 8 HTTP clients wrote a sixth less with 3
(docs/benchmarks.md, "Groups sent ahead")."""


class GroupCommit:
    """Gathers concurrent writes of this process into one insert transaction.

    A write that arrives while no group is being led commits at once (alone:
    no wait, so one client pays nothing). Writes that arrive while one is being
    led wait for it, then the first of them leads the next group: all that are
    queued by then (up to :data:`GROUP_MAX_EVENTS` events), after waiting at most
    ``window_s`` for writes still being built (:meth:`building`). Every write is
    answered only after the transaction that holds it commits, with its own
    positions or its own exception. A write that certainly conflicts, with an
    earlier one of its group or with what this process committed since it was
    built, or that read what another write of its group changes, is refused
    before the transaction (:mod:`palimpsest.projections.store.group_conflicts`), so that it
    neither costs its neighbours a refused group nor a round trip.

    A group sent in one round trip (``COMMIT`` included) hands the lead on as
    soon as it is sent, not once it is answered: the next group is composed and
    sent while PostgreSQL runs it, and waits there for the events table's lock,
    which orders their positions as it orders any two writers'. At most
    ``ahead`` groups are sent and unanswered while the next is led: its leader
    waits for one of them to be answered first (``ahead=0``: every group keeps
    the lead until it is answered). A group with a write that writes or reads
    what a group ahead writes, or stores content one stores, waits (with the
    lead) for those groups to be answered, then is checked as above. A group
    whose transaction must read an answer before its ``COMMIT`` (an idempotency
    record, a check of what it read) keeps the lead until it is answered.

    A group sent ahead waits for the events table's lock within the log's lock
    timeout (``PALIMPSEST_DB_LOCK_TIMEOUT_S``), as any write does; a group that
    keeps the lead makes the writes behind it wait in this process.
    """

    def __init__(
        self,
        recorder: TenantScopedRecorder,
        window_s: float = 0.0005,
        ahead: int = GROUPS_AHEAD,
    ) -> None:
        self.recorder = recorder
        self.window_s = window_s
        self.ahead = ahead
        self.sizes: collections.deque[int] = collections.deque(maxlen=1000)
        """Writes in each recent transaction of more than one (for tests and figures)."""
        self._mutex = threading.Lock()
        self._answered = threading.Condition(self._mutex)
        """Notified when a group sent ahead is answered (a leader may wait for room)."""
        self._queue: collections.deque[_Member] = collections.deque()
        self._leader: _Member | None = None
        """The write whose thread leads the next group (None: no group is being led)."""
        self._building = 0
        self._sent: list[list[_Member]] = []
        """The groups sent ahead and not yet answered, oldest first."""
        self._committed: dict[UUID, int] = {}
        """The last version of recently written aggregates, by the writes of this
        process that committed
        (:func:`palimpsest.projections.store.group_conflicts.conflicting`)."""

    @property
    def leading(self) -> bool:
        """Whether a write leads a group now, neither sent ahead nor answered yet (for
        tests)."""
        with self._mutex:
            return self._leader is not None

    @property
    def queued(self) -> int:
        """Writes waiting for the next group (for tests)."""
        with self._mutex:
            return len(self._queue)

    def building(self) -> _Building:
        """Return a context manager a writer holds while it builds a write that will
        join: a group about to commit waits (up to ``window_s``) for it."""
        return _Building(self)

    def commit(self, stored: Sequence[StoredEvent], write: WriteContext) -> Sequence[int]:
        """Commit one write's events with the group; return their log positions.

        Raises:
            IntegrityError, StaleReadError, DataError, DatabaseError: the database
                refused this write (its neighbours are not affected).
            OperationalError, InterfaceError: the database could not be written.
            WouldWaitError: within :func:`~palimpsest.projections.store.brief_waits.briefly`, a
                group was being led or was sent and not yet answered (the write did
                not join or follow it), or the write, tried alone, did not have a
                lock in time or met a database error.
        """
        member = _Member(stored, write)
        brief = brief_limit() is not None
        with self._mutex:
            leads = self._leader is None
            if brief and (not leads or self._sent):
                msg = "a group commit of this process is under way"
                raise WouldWaitError(msg)
            self._queue.append(member)
            if leads:
                self._leader = member
        try:
            if not leads:
                # Woken once: its group committed, or it is first in the queue and
                # leads. (One lock per writer, not a shared condition: a shared one
                # wakes every waiting writer at each commit, to find most not done.)
                member.wake.acquire()
            if not member.done:
                self._lead_then_hand_over(member)
        except BaseException:
            # Interrupted (Ctrl-C in an import) while it waited or was about to lead:
            # not written if no group took it yet, and the lead is never lost with it.
            self._withdraw(member)
            raise
        if member.error is not None:
            raise member.error
        return member.ids

    def _lead_then_hand_over(self, leader: _Member) -> None:
        """Commit a group (``leader``'s own write is first in the queue, so in it), and
        wake the next in the queue to lead (or stop leading), once the group is sent
        in one round trip or else once it is answered; then wake its other writers."""
        group: list[_Member] = []
        sending = _Sending(self)
        try:
            # A brief write commits alone: its short lock wait is not its neighbours'.
            self._lead(group, sending, most=1 if brief_limit() is not None else None)
        finally:
            sending.answered()
            unwritten = [m for m in group if not m.done]
            if unwritten:  # taken from the queue, then the leader was interrupted
                taken = {id(m) for m in unwritten}
                with self._mutex:
                    self._queue = collections.deque(m for m in self._queue if id(m) not in taken)
                for member in unwritten:
                    member.error = OperationalError(
                        "the write's group commit was interrupted before its insert:"
                        " nothing of it was written"
                    )
                    member.done = True
            if sending.handed_over:
                pass  # the next group was led while this one ran
            elif leader.done:
                self._hand_over()
            else:
                self._withdraw(leader)  # interrupted before it took its own write
            for member in group:
                if member is not leader:
                    member.wake.release()

    def _hand_over(self) -> None:
        """Make the first queued write the leader and wake it (or stop leading)."""
        with self._mutex:
            following = self._leader = self._queue[0] if self._queue else None
        if following is not None:
            following.wake.release()

    def _withdraw(self, member: _Member) -> None:
        """Take out of the queue a write whose thread was interrupted, handing the lead on
        if it had it (a write a group already took stays in it). Safe to repeat."""
        with self._mutex:
            self._queue = collections.deque(m for m in self._queue if m is not member)
            led = self._leader is member
        if led:
            self._hand_over()

    def _lead(self, group: list[_Member], sending: _Sending, most: int | None = None) -> None:
        """Take the next group (of at most ``most`` writes, if given) from the queue
        into ``group`` (as it goes, so that the caller answers every write taken, even
        if this is interrupted), once fewer than ``ahead`` groups are sent ahead,
        and commit it (``sending`` is called once it is sent in one round trip)."""
        with self._mutex:
            while self._sent and len(self._sent) >= self.ahead:
                self._answered.wait()
        self._take(group, most)
        live = group  # the writes the transaction holds (all, until some are refused)
        try:
            refused = self._conflicting(group)
            for index, error in refused.items():
                group[index].error = error
            live = sending.live = [m for i, m in enumerate(group) if i not in refused]
            if len(live) == 1:
                # Alone: the pipelined insert, with no savepoint to pay for.
                live[0].ids = (
                    self.recorder.insert_events(live[0].stored, write=live[0].write, sent=sending)
                    or ()
                )
            elif live:  # (none when every write was refused: no transaction at all)
                results = self.recorder.insert_group([(m.stored, m.write) for m in live], sending)
                self.sizes.append(len(live))
                for member, result in zip(live, results, strict=True):
                    if isinstance(result, Exception):
                        member.error = result
                    else:
                        member.ids = result
            self._remember([m for m in live if m.error is None])
        except BaseException as e:  # every writer of the group is answered, never left waiting
            for member in live:
                member.error = e
        finally:
            for member in group:
                member.done = True

    def _take(self, group: list[_Member], most: int | None) -> None:
        """Move the next group's writes from the queue into ``group``: as many as
        :data:`GROUP_MAX_EVENTS` allows, after waiting up to ``window_s`` for writes
        still being built; or, with ``most``, that many at most and no wait."""
        if most is None:
            deadline = time.monotonic() + self.window_s
            while self._building and time.monotonic() < deadline:
                time.sleep(self.window_s / 5)
        with self._mutex:
            events = 0
            while (
                self._queue
                and (most is None or len(group) < most)
                and (not group or events + len(self._queue[0].stored) <= GROUP_MAX_EVENTS)
            ):
                group.append(self._queue[0])
                self._queue.popleft()
                events += len(group[-1].stored)

    def _conflicting(self, group: list[_Member]) -> dict[int, Exception]:
        """Return, by index, the refusals of ``group``'s writes that conflict with an
        earlier one of it or with what this process committed
        (:func:`~palimpsest.projections.store.group_conflicts.conflicting`), once no group sent
        ahead writes what one of them writes or reads.

        Such a group waits for the groups ahead to be answered, as it would have
        queued behind them: refused at once, its write would be built again from
        the same versions (theirs are not committed yet) and refused again, until
        its writer gave up. So does a group that stores content a group ahead
        stores: one of them may insert that payload row before the events table's
        lock and the other under it, and each would wait for the other in
        PostgreSQL until its deadlock check, a second later."""
        with self._mutex:
            # (Only groups ahead leave meanwhile: none can be sent while this one leads.)
            if self._sent:
                touched = {as_uuid(e.originator_id) for m in group for e in m.stored}
                touched.update(i for m in group for i in m.write.read_versions)
                contents = {digest for m in group for digest in m.write.payloads}
                while any(
                    not contents.isdisjoint(m.write.payloads)
                    or any(as_uuid(e.originator_id) in touched for e in m.stored)
                    for sent in self._sent
                    for m in sent
                ):
                    self._answered.wait()
            return conflicting([(m.stored, m.write.read_versions) for m in group], self._committed)

    def _remember(self, committed: list[_Member]) -> None:
        """Note the last version of each aggregate the committed members recorded,
        forgetting the oldest beyond a bound."""
        with self._mutex:  # (the leader of a group sent behind reads it)
            for member in committed:
                for event in member.stored:
                    aggregate_id = as_uuid(event.originator_id)
                    self._committed.pop(aggregate_id, None)  # the newest last
                    self._committed[aggregate_id] = event.originator_version
            while len(self._committed) > _COMMITTED_ENTRIES:
                del self._committed[next(iter(self._committed))]


class _Sending:
    """One group's lead, handed on once the group is sent (called by the insert), if
    the group commit lets groups run ahead; :meth:`answered` ends its time ahead."""

    def __init__(self, commit: GroupCommit) -> None:
        self.commit = commit
        self.live: list[_Member] = []
        """The writes the group's transaction holds (set before it is sent)."""
        self.ahead = False
        """Whether the group is among those sent ahead (until :meth:`answered`)."""
        self.handed_over = False
        """Whether the next group's leader was woken (its leader then wakes no one)."""

    def __call__(self) -> None:
        """The group's round trip is on its way: the next group may be led (once; a
        transaction tried again is not sent ahead again)."""
        commit = self.commit
        if self.ahead or commit.ahead < 1:
            return
        with commit._mutex:
            commit._sent.append(self.live)
            self.ahead = True
        commit._hand_over()
        self.handed_over = True

    def answered(self) -> None:
        """The group is answered (or its leader was interrupted): it is no longer ahead."""
        if not self.ahead:
            return
        commit = self.commit
        with commit._mutex:
            commit._sent = [g for g in commit._sent if g is not self.live]
            commit._answered.notify_all()


class _Building:
    def __init__(self, group: GroupCommit) -> None:
        self.group = group

    def __enter__(self) -> None:
        with self.group._mutex:
            self.group._building += 1

    def __exit__(self, *_: object) -> None:
        with self.group._mutex:
            self.group._building -= 1


class TenantScopedSnapshotRecorder(_TenantScopedReads, PostgresAggregateRecorder):
    """The snapshot store's recorder: rows are written and read for the current tenant."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert snapshots for the tenant of the enclosing scope; an existing
        snapshot of the same version is left as it is (it holds the same state)."""
        if not stored_events:
            return None
        with self.datastore.transaction(commit=True) as curs:
            set_tenant(curs, current_tenant())
            curs.execute(
                _table_query(_INSERT_SNAPSHOTS, self.datastore.schema, self.events_table_name),
                _stored_columns(stored_events),
            )
        return None


def event_mapper() -> Mapper[UUID]:
    """Return a mapper that decodes this log's events and snapshots, with no
    application attached (for replay workers in other processes)."""
    # Explicit topics resolve only once their classes are defined: import them all.
    import palimpsest.domain.decision
    import palimpsest.domain.memory
    import palimpsest.domain.observation
    import palimpsest.domain.tenant  # noqa: F401

    transcoder = JSONTranscoder()
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO(), *SNAPSHOT_TRANSCODINGS):
        transcoder.register(transcoding)
    return Mapper(transcoder=transcoder)


class EventLog(Application[UUID]):
    """The palimpsest event log (table ``palimpsest_events``).

    One instance per process; it owns the process's connection pool, which
    the projections reuse through :attr:`datastore`. Memories are snapshotted
    every :data:`SNAPSHOT_INTERVAL` events, so loading one (to write, or to
    read it as of a position) replays at most that many events.
    """

    name = "palimpsest"
    is_snapshotting_enabled = True

    def register_transcodings(self, transcoder: JSONTranscoder) -> None:
        """Register the library's transcodings and those of snapshot state."""
        super().register_transcodings(transcoder)
        for transcoding in SNAPSHOT_TRANSCODINGS:
            transcoder.register(transcoding)

    def construct_snapshot_store(self) -> EventStore[UUID]:
        """Return the snapshot store, on the tenant-scoped snapshots table."""
        recorder = self.recorder
        assert isinstance(recorder, TenantScopedRecorder)
        return EventStore(
            mapper=self.mapper,
            recorder=TenantScopedSnapshotRecorder(
                recorder.datastore, events_table_name=SNAPSHOTS_TABLE
            ),
        )

    def snapshot_due(self, aggregates: Iterable[Aggregate], recorded: int) -> None:
        """Snapshot the memories whose version crossed a multiple of the interval.

        Runs after the write committed, in its own transaction (as the library's
        ``save()`` does): a snapshot that fails to be written costs only speed.
        """
        due = [
            a
            for a in aggregates
            if isinstance(a, Memory)
            and a.version // SNAPSHOT_INTERVAL > (a.version - recorded) // SNAPSHOT_INTERVAL
        ]
        if due and self.snapshots is not None:
            self.snapshots.put([Snapshot.take(a) for a in due])

    @property
    def group(self) -> GroupCommit:
        """Return this process's group commit (made on first use)."""
        found: GroupCommit | None = self.__dict__.get("_group")
        if found is None:
            recorder = self.recorder
            assert isinstance(recorder, TenantScopedRecorder)
            found = self.__dict__.setdefault("_group", GroupCommit(recorder))
        return found

    def record(
        self, aggregates: Iterable[Aggregate], write: WriteContext, *, grouped: bool = False
    ) -> list[Recording[UUID]]:
        """Record the pending events of ``aggregates`` in one transaction with ``write``.

        ``grouped``: the transaction may hold concurrent writes of this process too
        (:class:`GroupCommit`), when this one has at most :data:`GROUP_MAX_EVENTS`
        events and reserves no archivals; it is answered, as alone, only after that
        transaction commits.

        This is ``save()`` without its per-object protocol dispatch, which
        cost a tenth of a 100-memory batch; this application has no snapshot
        or notification hooks for ``save()`` to run.

        ``aggregates`` with no pending events are what the write read: it
        commits only if none of them has changed since (``StaleReadError``
        otherwise, and nothing is written).

        Returns:
            One recording (event and log position) per event, in order.

        Raises:
            CollapseGuardError: ``write.archivals`` would pass the collapse guard's
                allowance (nothing is written).
        """
        aggregates = list(aggregates)
        pending = {a.id: len(a.pending_events) for a in aggregates}
        write.read_versions = {a.id: a.version for a in aggregates if not pending[a.id]}
        write.loaded = frozenset(pending)
        events = [event for aggregate in aggregates for event in aggregate.collect_events()]
        # Read-model rows hold text PostgreSQL can store, whatever the events carry.
        write.dependencies = storable(dependencies_of(events))
        if grouped and len(events) <= GROUP_MAX_EVENTS and write.archivals is None:
            recordings = self._put_grouped(events, write)
        else:
            recordings = self.events.put(events, write=write)
        for aggregate in aggregates:
            if pending[aggregate.id]:
                self.snapshot_due([aggregate], pending[aggregate.id])
        return recordings

    def _put_grouped(
        self, events: Sequence[DomainEventProtocol[UUID]], write: WriteContext
    ) -> list[Recording[UUID]]:
        """``EventStore.put``, with the insert made by the group commit."""
        stored = [self.mapper.to_stored_event(e) for e in events]
        ids = self.group.commit(stored, write)
        return [
            Recording(
                d,
                Notification(
                    originator_id=s.originator_id,
                    originator_version=s.originator_version,
                    topic=s.topic,
                    state=s.state,
                    id=n,
                ),
            )
            for d, s, n in zip(events, stored, ids, strict=True)
        ]

    @property
    def datastore(self) -> PostgresDatastore:
        """Return the connection pool of the runtime role."""
        recorder = self.recorder
        assert isinstance(recorder, TenantScopedRecorder)
        return recorder.datastore
