"""The statements the recorder sends: events, snapshots, payloads, tokens, idempotency
records, and the log's own marks (revisions, links, citations, support).

Each is rendered once per schema and table (the write path runs them on every
save), and the rows go out as plain arrays in binary format (``%b``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, LiteralString

from eventsourcing.persistence import ProgrammingError, StoredEvent
from psycopg import sql
from psycopg.types.json import Jsonb

from palimpsest.domain.dependency import Citation, Dependencies, Link, Support
from palimpsest.projections.store.arrays import (
    BoolArray,
    ByteaArray,
    Int8Array,
    TextArray,
    UuidArray,
)
from palimpsest.projections.store.queued import QueuingCursor
from palimpsest.projections.store.sql import WRITE_POSITION_SETTING, Chain, schema_query

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.pq.abc import PGresult

    from palimpsest.projections.store._write import Positions, TokenRow, WriteContext

_INSERT_EVENTS = (
    "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)"
    " SELECT * FROM unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[])"
    " RETURNING notification_id"
)
"""Stored events as four plain arrays in binary format, where the library passes one
array of a composite type that psycopg dumps element by element in Python."""

INSERT_SNAPSHOTS = (
    "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state)"
    " SELECT * FROM unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[])"
    " ON CONFLICT DO NOTHING"
)


@lru_cache(maxsize=16)
def table_query(template: LiteralString, schema: str, table: str) -> bytes:
    """Return ``template`` with ``{schema}`` and ``{table}`` filled in as identifiers,
    rendered once per schema and table (the write path runs these on every save)."""
    return (
        sql.SQL(template)
        .format(schema=sql.Identifier(schema), table=sql.Identifier(table))
        .as_bytes(None)
    )


@lru_cache(maxsize=16)
def insert_events_query(schema: str, table: str) -> bytes:
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
def select_events_query(
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


def queued_at(curs: Cursor[Any]) -> int:
    """Return where the statement ``curs`` queued is in its transaction's queue."""
    assert isinstance(curs, QueuingCursor) and curs.index is not None
    return curs.index


def answered_positions(result: PGresult) -> list[int]:
    """Return the positions :data:`_INSERT_EVENTS` answered in ``result`` (text format)."""
    return [int(result.get_value(row, 0) or b"") for row in range(result.ntuples)]


def counted(ids: list[int], stored: Sequence[StoredEvent]) -> list[int]:
    """Return ``ids``, the positions an insert of ``stored`` answered.

    Raises:
        ProgrammingError: it answered fewer positions than events.
    """
    if len(ids) != len(stored):
        msg = f"the insert answered {len(ids)} positions for {len(stored)} events"
        raise ProgrammingError(msg)
    return ids


def stored_columns(stored: Sequence[StoredEvent]) -> tuple[list[Any], ...]:
    """Return the columns of ``stored`` for :data:`_INSERT_EVENTS` (and snapshots)."""
    return (
        UuidArray(e.originator_id for e in stored),
        Int8Array(e.originator_version for e in stored),
        TextArray(e.topic for e in stored),
        ByteaArray(e.state for e in stored),
    )


INSERT_PAYLOADS: LiteralString = (
    "INSERT INTO {schema}.payloads (digest, content, size_bytes)"
    " SELECT d, c, octet_length(c) FROM unnest(%b::text[], %b::bytea[]) AS p(d, c)"
    " ON CONFLICT DO NOTHING"
)
"""Store content by digest, once: a digest held already keeps its row."""


def payload_columns(payloads: Mapping[str, bytes]) -> tuple[TextArray, ByteaArray]:
    """Return ``payloads`` as the columns of :data:`INSERT_PAYLOADS`."""
    return TextArray(payloads), ByteaArray(payloads.values())


PAYLOADS_UNDER_LOCK_BYTES = 8192
"""The most content a write's payloads may hold to be inserted with its marks, under
the events table's lock (one statement fewer, 33 microseconds of this process):
larger content is sent, compressed and logged before the lock, not while every
other writer waits for it."""


def payloads_with_marks(write: WriteContext, stored_events: Sequence[StoredEvent]) -> bool:
    """Whether ``write``'s payloads go in its marks' statement (``mark_for_revision``)
    rather than in a statement of their own before the events table's lock."""
    return (
        bool(write.payloads)
        and bool(stored_events)
        and write.dependencies is not None
        and sum(map(len, write.payloads.values())) <= PAYLOADS_UNDER_LOCK_BYTES
    )


def mark_for_revision(
    chain: Chain, schema: str, found: Dependencies, payloads: Mapping[str, bytes]
) -> None:
    """Queue on ``chain`` the write's ``payloads`` (content by digest), its links,
    citations and support, and the raise of the requested revision of what can change.

    Runs inside the transaction that inserts the events, so no reader ever
    sees an event whose requested revision has not been raised. A belief is
    projected from its memory's own events and the edges touching it
    (``domain/belief.py``), so what can change is exactly the memories the
    write records events on and both ends of each edge it adds
    (``Dependencies.touched``): nothing transitive, and nothing for merely
    citing the same observation. The whole transaction is one log position
    for readers, so its last position is each one's new requested revision.
    """
    if payloads:
        chain.add(schema_query(INSERT_PAYLOADS, schema), payload_columns(payloads))
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
    links = found.of(Link)
    if links:
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
                UuidArray(x.memory_id for x in links),
                UuidArray(x.linked_id for x in links),
                TextArray(x.kind for x in links),
                BoolArray(x.outgoing for x in links),
                UuidArray(x.edge_id for x in links),
            ),
        )
    citations = found.of(Citation)
    if citations:
        chain.add(
            schema_query(
                "INSERT INTO {schema}.evidence_links (observation_id, memory_id, position)"
                " SELECT o, m, {position} FROM unnest(%b::uuid[], %b::uuid[]) AS t(o, m)"
                " ON CONFLICT DO NOTHING",
                schema,
            ),
            (
                UuidArray(c.observation_id for c in citations),
                UuidArray(c.memory_id for c in citations),
            ),
        )
    supports = found.of(Support)
    if supports:
        chain.add(
            schema_query(
                "INSERT INTO {schema}.proposer_links (proposer_id, model_id, memory_id, position)"
                " SELECT p, mo, me, {position} FROM unnest(%b::uuid[], %b::text[], %b::uuid[])"
                " AS t(p, mo, me) ON CONFLICT DO NOTHING",
                schema,
            ),
            (
                UuidArray(s.proposer_id for s in supports),
                TextArray(s.model_id for s in supports),
                UuidArray(s.memory_id for s in supports),
            ),
        )


def write_tokens(curs: Cursor[Any], schema: str, write: WriteContext) -> None:
    """Delete the lookup rows of the tokens ``write`` revokes; insert those it issues."""
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
            _token_columns(write.tokens),
        )


def _token_columns(tokens: Sequence[TokenRow]) -> tuple[list[Any], ...]:
    return tuple(
        list(column)
        for column in zip(
            *(
                (t.token_digest, t.token_id, t.principal_id, t.principal_name, t.role)
                for t in tokens
            ),
            strict=True,
        )
    )


def record_idempotency(
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
