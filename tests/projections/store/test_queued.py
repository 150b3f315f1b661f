"""A queued transaction goes out with its ``COMMIT`` in one round trip, through libpq:
each statement answered, a refusal or a value a column cannot hold leaving nothing,
statements sent again prepared; and the event log's writes take that way unless
they must read an answer before their ``COMMIT``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from eventsourcing.persistence import InternalError
from psycopg.conninfo import make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn, PGresult

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store import _recorder, queued, tenancy
from palimpsest.projections.store._pipelined import pipelined_transaction
from palimpsest.projections.store.arrays import Int8Array, UuidArray
from palimpsest.projections.store.queued import Queued, QueuingCursor, UnqueueableError, send_queued
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.sql import schema_query
from palimpsest.projections.store.tenancy import queued_transaction
from palimpsest.projections.store.work_due import mark_published
from tests.conftest import (
    Tenant,
    drain_until_caught_up,
    fact_spec,
    library_writer,
    logged_position,
    owner_rows,
)

_INSERT: bytes = b"INSERT INTO scratch VALUES (%s)"


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[TransactionStatus]:
    """The server's transaction status each time :func:`send_queued` took answers:
    ``INTRANS`` would mean PostgreSQL then waited for this process, inside the
    transaction."""
    seen: list[TransactionStatus] = []
    exchange = queued._exchange

    def recording(pgconn: PGconn, sent: Callable[[], None] | None = None) -> list[PGresult]:
        try:
            return exchange(pgconn, sent)
        finally:
            seen.append(TransactionStatus(pgconn.transaction_status))

    monkeypatch.setattr(queued, "_exchange", recording)
    return seen


def _scratch(runtime: Runtime) -> psycopg.Connection[tuple[Any, ...]]:
    conn = psycopg.connect(make_conninfo("", **runtime.database.owner_conninfo()), autocommit=True)
    conn.execute("CREATE TEMP TABLE scratch (x int)")
    return conn


def _scratch_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT x FROM scratch ORDER BY x").fetchall()


def _prepared_here(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return {name for (name,) in rows if name.startswith("_palimpsest_")}


def test_a_queued_transaction_commits_in_one_round_trip_and_answers_each_statement(
    runtime: Runtime, answered: list[TransactionStatus]
) -> None:
    with _scratch(runtime) as conn:
        results = send_queued(
            conn,
            [
                (_INSERT, (1,)),
                (
                    b"INSERT INTO scratch SELECT unnest(%b::int8[]) RETURNING x",
                    (Int8Array([2, 3]),),
                ),
                (b"SELECT '100%%', %b::text, %s::int", ("b", 4)),
                # Without parameters a statement goes as it is, as psycopg sends it.
                (b"SELECT '50%%'", None),
            ],
        )
        assert answered == [TransactionStatus.IDLE]
        assert [r.ntuples for r in results] == [0, 2, 1, 1]
        assert [results[1].get_value(i, 0) for i in range(2)] == [b"2", b"3"]
        assert [results[2].get_value(0, i) for i in range(3)] == [b"100%", b"b", b"4"]
        assert results[3].get_value(0, 0) == b"50%%"
        assert _scratch_rows(conn) == [(1,), (2,), (3,)]


def test_sent_is_told_once_the_whole_transaction_is_sent_before_its_answers(
    runtime: Runtime,
) -> None:
    """What a group commit hands its lead on at: the transaction, ``COMMIT`` included,
    is on its way, and PostgreSQL is still running it."""
    sent: list[float] = []
    with _scratch(runtime) as conn:
        started = time.monotonic()
        send_queued(
            conn,
            [(_INSERT, (1,)), (b"SELECT pg_sleep(0.5)", None)],
            sent=lambda: sent.append(time.monotonic() - started),
        )
        answered = time.monotonic() - started
        assert _scratch_rows(conn) == [(1,)]
    assert len(sent) == 1
    assert sent[0] < 0.4 and answered >= 0.5, (sent, answered)


@pytest.mark.parametrize(
    ("statements", "refusal"),
    [
        pytest.param(
            [(_INSERT, (1,)), (b"SELECT 1 / 0", ()), (_INSERT, (3,))],
            psycopg.errors.DivisionByZero,
            id="refused-statement",
        ),
        pytest.param(
            [(_INSERT, (1,)), (b"SELECT %b::uuid[]", (UuidArray(["not a uuid"]),))],
            psycopg.DataError,
            id="value-the-type-cannot-hold",
        ),
    ],
)
def test_a_refused_queued_transaction_leaves_nothing_and_the_connection_usable(
    runtime: Runtime, statements: list[Queued], refusal: type[Exception]
) -> None:
    with _scratch(runtime) as conn:
        for _ in range(2):  # the second time, a statement sent before goes out prepared
            with pytest.raises(refusal):
                send_queued(conn, statements)
            assert conn.info.transaction_status == TransactionStatus.IDLE
            assert _scratch_rows(conn) == []
        send_queued(conn, [(_INSERT, (2,))])
        assert _scratch_rows(conn) == [(2,)]


def test_a_statement_sent_again_is_prepared_and_kept_through_a_refusal(runtime: Runtime) -> None:
    with _scratch(runtime) as conn:
        send_queued(conn, [(_INSERT, (1,))])
        assert _prepared_here(conn) == set()
        send_queued(conn, [(_INSERT, (2,))])
        [name] = _prepared_here(conn)
        conn.execute("SELECT 1", prepare=True)  # psycopg holds one of its own too
        with pytest.raises(psycopg.errors.DivisionByZero):
            send_queued(conn, [(_INSERT, (3,)), (b"SELECT 1 / 0", ())])
        send_queued(conn, [(_INSERT, (4,))])
        # Rolled back without psycopg, which would have deallocated both: the same one.
        assert _prepared_here(conn) == {name}
        assert _scratch_rows(conn) == [(1,), (2,), (4,)]


def test_statements_psycopg_deallocated_are_prepared_again(runtime: Runtime) -> None:
    with _scratch(runtime) as conn:
        send_queued(conn, [(_INSERT, (1,))])
        send_queued(conn, [(_INSERT, (2,))])
        assert len(_prepared_here(conn)) == 1
        # psycopg deallocates every statement on the connection when a transaction in
        # which it holds prepared statements of its own rolls back.
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT 1", prepare=True)
        assert _prepared_here(conn) == set()
        send_queued(conn, [(_INSERT, (3,))])  # refused for its statement, sent again
        send_queued(conn, [(_INSERT, (4,))])
        assert len(_prepared_here(conn)) == 1
        assert _scratch_rows(conn) == [(1,), (2,), (3,), (4,)]


def test_a_queuing_cursor_runs_nothing_and_refuses_to_answer(runtime: Runtime) -> None:
    with _scratch(runtime) as conn:
        statements: list[Queued] = []
        curs = QueuingCursor(conn, statements)
        curs.execute(_INSERT, (1,))
        assert (statements, curs.index) == ([(_INSERT, (1,))], 0)
        for asking in (
            curs.fetchone,
            curs.fetchall,
            curs.fetchmany,
            lambda: list(curs),
            lambda: curs.executemany(_INSERT, [(2,), (3,)]),
            lambda: curs.execute(b"SELECT %(x)s", {"x": 1}),  # named parameters
        ):
            with pytest.raises(UnqueueableError):
                asking()
        assert _scratch_rows(conn) == []


@pytest.fixture
def ways(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How the event log sent each transaction: ``queued`` or ``psycopg``."""
    taken: list[str] = []

    def by_libpq(conn: psycopg.Connection[Any], statements: Any, **kwargs: Any) -> Any:
        taken.append("queued")
        return send_queued(conn, statements, **kwargs)

    def by_psycopg(conn: psycopg.Connection[Any]) -> Any:
        taken.append("psycopg")
        return pipelined_transaction(conn)

    monkeypatch.setattr(_recorder, "send_queued", by_libpq)
    monkeypatch.setattr(_recorder, "pipelined_transaction", by_psycopg)
    return taken


def test_a_write_goes_out_queued_and_a_keyed_one_through_psycopg(
    runtime: Runtime, tenant: Tenant, ways: list[str]
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    plain = writer.write(caller, [fact_spec("the office moved")], batch=False).body
    assert ways == ["queued"]
    assert plain["position"] == logged_position(runtime, plain["id"])
    # Its idempotency record holds its positions: read before its COMMIT.
    key = (f"key-{uuid4()}", "sha256:a")
    keyed = writer.write(
        caller, [fact_spec("the office moved again")], batch=False, idempotency=key
    )
    assert ways == ["queued", "psycopg"]
    assert keyed.body["position"] == logged_position(runtime, keyed.body["id"])


def test_a_group_of_two_tenants_goes_out_queued_with_each_write_its_own_positions(
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    ways: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: dict[str, Any] = {}
    # The writes behind the first queue for one group: it keeps the lead until answered.
    monkeypatch.setattr(runtime.log.group, "ahead", 0)

    def write(name: str, who: Tenant) -> threading.Thread:
        caller = authenticate(runtime.log, who.admin.token)

        def run() -> None:
            spec = fact_spec(f"written by {name}")
            answers[name] = library_writer(runtime).write(caller, [spec], batch=False).body

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    group = runtime.log.group
    group.sizes.clear()
    with runtime.database.owner_connection() as holder:
        holder.execute(f'LOCK TABLE "{runtime.database.schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        threads = [write("first", tenant)]
        deadline = time.monotonic() + 20
        while not ways:  # the first write is sent, and waits for the table
            assert time.monotonic() < deadline, "the first write was never sent"
            time.sleep(0.01)
        threads += [write("mine", tenant), write("theirs", other_tenant)]
        while group.queued < 2:
            assert time.monotonic() < deadline, "the two writes never queued"
            time.sleep(0.01)
        holder.commit()
    for thread in threads:
        thread.join(30)
    assert list(group.sizes) == [2]
    assert ways == ["queued", "queued"]
    for answer in answers.values():
        assert answer["position"] == logged_position(runtime, answer["id"])


def _index_marks(runtime: Runtime, tenant: Tenant) -> int:
    query = "SELECT coalesce(sum(marked), 0) FROM {schema}.index_tenants WHERE tenant_id = %s"
    [(marks,)] = owner_rows(runtime, query, tenant.id)
    return int(marks)


def test_a_queued_tenant_transaction_sends_nothing_if_its_block_raises(
    runtime: Runtime, tenant: Tenant
) -> None:
    datastore, schema = runtime.log.datastore, runtime.database.schema
    before = _index_marks(runtime, tenant)
    with (
        pytest.raises(ZeroDivisionError),
        queued_transaction(datastore, tenant.id, commit=True) as cur,
    ):
        mark_published(cur, schema, tenant.id)
        _ = 1 / 0
    assert _index_marks(runtime, tenant) == before
    with queued_transaction(datastore, tenant.id, commit=True) as cur:
        mark_published(cur, schema, tenant.id)
        mark_published(cur, schema, tenant.id)
        assert _index_marks(runtime, tenant) == before  # queued, not sent yet
    assert _index_marks(runtime, tenant) == before + 2
    with pytest.raises(psycopg.InterfaceError):  # sent: nothing more would ever be
        mark_published(cur, schema, tenant.id)
    with (
        pytest.raises(InternalError) as refused,  # eventsourcing's, of psycopg's
        queued_transaction(datastore, tenant.id, commit=False) as cur,
    ):
        mark_published(cur, schema, tenant.id)
    assert isinstance(refused.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
    assert _index_marks(runtime, tenant) == before + 2


def test_a_queued_transactions_answers_are_read_once_it_is_sent(
    runtime: Runtime, tenant: Tenant
) -> None:
    datastore, schema = runtime.log.datastore, runtime.database.schema
    caller = authenticate(runtime.log, tenant.admin.token)
    written = library_writer(runtime).write(caller, [fact_spec("standup is at ten")], batch=False)
    memory_id = UUID(str(written.body["id"]))
    at = datetime(2026, 10, 1, 9, 30, tzinfo=UTC)
    with queued_transaction(datastore, tenant.id, commit=False) as cur:
        cur.execute(schema_query("SELECT memory_id, requested FROM {schema}.revisions", schema))
        revisions = cur.answer()
        cur.execute(
            b"SELECT %s::int + 1, %s::text, NULL::bytea, %s::bytea, %s::timestamptz,"
            b" current_setting('transaction_isolation')",
            (41, "x", b"\x00\xff", at),
        )
        typed = cur.answer()
        with pytest.raises(UnqueueableError):
            _ = revisions.rows  # not sent yet
    assert revisions.rows == [(memory_id, logged_position(runtime, memory_id))]
    # Loaded by type, as psycopg's cursors load them; and a read sees one snapshot.
    assert typed.rows == [(42, "x", None, b"\x00\xff", at, "repeatable read")]
    with queued_transaction(datastore, None, commit=False) as cur:
        cur.execute(schema_query("SELECT memory_id FROM {schema}.revisions", schema))
        unseen = cur.answer()
    assert unseen.rows == []  # no tenant: row-level security shows nothing


def test_a_drain_pass_sends_each_of_its_transactions_whole(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[bytes] = []
    counts: list[int] = []

    def recording(conn: psycopg.Connection[Any], statements: Any, **kwargs: Any) -> Any:
        sent.append(b" ; ".join(query for query, _ in statements))
        counts.append(len(statements))
        return send_queued(conn, statements, **kwargs)

    drain_until_caught_up(runtime)  # what other tests left
    monkeypatch.setattr(tenancy, "send_queued", recording)
    caller = authenticate(runtime.log, tenant.admin.token)
    library_writer(runtime).write(caller, [fact_spec("standup is at ten")], batch=False)
    sent.clear()
    counts.clear()
    executed: list[object] = []
    execute = psycopg.Cursor.execute

    def executing(cur: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(query)
        return execute(cur, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", executing)
    assert drain_until_caught_up(runtime) == 1

    def sent_with(*parts: bytes) -> list[int]:
        return [counts[i] for i, text in enumerate(sent) if all(p in text for p in parts)]

    # Each in one round trip, its tenant's setting first: the claim; the facts, both
    # the events (loaded by key alone: bitmap scans off, then as before) and the links
    # in one snapshot; the publish (the beliefs, planning
    # for the tenant, the revisions, the recall mark, the NOTIFY); the clean check.
    # (Another tenant marked by an earlier test's leftovers, with nothing to publish,
    # may be claimed and cleaned too: each of those transactions still goes whole.)
    claims = sent_with(b"SET claimed_until = clock_timestamp()")
    assert claims and set(claims) == {2}
    assert sent_with(b"WITH wanted AS", b"memory_links") == [5]
    assert sent_with(b"INSERT INTO", b"beliefs") == [6]
    cleaned = sent_with(b"SET drained_position")
    assert cleaned and set(cleaned) == {2}
    assert sent_with(b"marked_position AS seen") == [2, 2]  # its due tenants, each pass
    assert executed == []  # nothing through psycopg's cursors
