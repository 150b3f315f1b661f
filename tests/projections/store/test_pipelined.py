"""A pipelined transaction goes out with its ``COMMIT``: PostgreSQL never waits for
this process, holding the transaction's locks, between a write's statements and its
commit; a refusal or an exception rolls it back whole."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.pq import TransactionStatus
from psycopg.pq.abc import PGconn, PGresult

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import VersionSpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store import queued as queued_module
from palimpsest.projections.store._pipelined import pipelined_transaction
from palimpsest.projections.store.tenancy import tenant_transaction
from tests.conftest import Tenant, drain_until_caught_up, fact_spec, library_writer


@pytest.fixture
def answered(monkeypatch: pytest.MonkeyPatch) -> list[TransactionStatus]:
    """The server's transaction status each time this process took answers in pipeline
    mode (a sync, or the end of a pipeline, psycopg's or libpq's own through
    :func:`~palimpsest.projections.store._pipelined.send_queued`): ``INTRANS`` means PostgreSQL
    then waited for this process, inside the transaction."""
    seen: list[TransactionStatus] = []
    sync, leave = psycopg.Pipeline.sync, psycopg.Pipeline.__exit__
    exchange = queued_module._exchange

    def recording_sync(self: psycopg.Pipeline) -> None:
        sync(self)
        seen.append(TransactionStatus(self.pgconn.transaction_status))

    def recording_exit(self: psycopg.Pipeline, *exc: Any) -> None:
        try:
            leave(self, *exc)
        finally:
            seen.append(TransactionStatus(self.pgconn.transaction_status))

    def recording_exchange(
        pgconn: PGconn, sent: Callable[[], None] | None = None
    ) -> list[PGresult]:
        try:
            return exchange(pgconn, sent)
        finally:
            seen.append(TransactionStatus(pgconn.transaction_status))

    monkeypatch.setattr(psycopg.Pipeline, "sync", recording_sync)
    monkeypatch.setattr(psycopg.Pipeline, "__exit__", recording_exit)
    monkeypatch.setattr(queued_module, "_exchange", recording_exchange)
    return seen


def test_a_write_commits_in_the_round_trip_that_sends_it(
    runtime: Runtime, tenant: Tenant, answered: list[TransactionStatus]
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    writer = library_writer(runtime)
    created = writer.write(caller, [fact_spec("the office moved")], batch=False).body
    revised = VersionSpec(UUID(created["id"]), "the office moved again", (), None, 1.0)
    writer.write(caller, [revised], batch=False)
    assert answered, "the writes sent no pipeline"
    _never_waited(answered)


def test_a_publish_commits_in_the_round_trip_that_sends_it(
    runtime: Runtime, tenant: Tenant, answered: list[TransactionStatus]
) -> None:
    caller = authenticate(runtime.log, tenant.admin.token)
    library_writer(runtime).write(caller, [fact_spec("standup is at ten")], batch=False)
    answered.clear()
    assert drain_until_caught_up(runtime) >= 1
    assert answered, "the publish sent no pipeline"
    _never_waited(answered)


def _never_waited(answered: list[TransactionStatus]) -> None:
    """Assert that no exchange left PostgreSQL waiting for this process: none ended
    inside a transaction, and one that ended in a refused one (``INERROR``: a statement
    prepared here that psycopg had deallocated since, which other tests' rollbacks
    make it do; the transaction is then sent again) was rolled back at the next."""
    assert TransactionStatus.INTRANS not in answered, answered
    assert answered[-1] == TransactionStatus.IDLE, answered
    for status, after in pairwise(answered):
        if status == TransactionStatus.INERROR:
            assert after == TransactionStatus.IDLE, answered


def _scratch(runtime: Runtime) -> psycopg.Connection[tuple[Any, ...]]:
    conn = psycopg.connect(make_conninfo("", **runtime.database.owner_conninfo()), autocommit=True)
    conn.execute("CREATE TEMP TABLE scratch (x int)")
    return conn


@pytest.mark.parametrize(
    "fail",
    [
        pytest.param(lambda conn: conn.execute("SELECT 1 / 0"), id="refused-statement"),
        pytest.param(lambda conn: 1 / 0, id="exception-in-the-block"),
    ],
)
def test_a_failed_pipelined_transaction_leaves_nothing_and_the_connection_usable(
    runtime: Runtime, fail: Callable[[psycopg.Connection[Any]], object]
) -> None:
    with _scratch(runtime) as conn:
        with (
            pytest.raises((psycopg.errors.DivisionByZero, ZeroDivisionError)),
            pipelined_transaction(conn),
        ):
            conn.execute("INSERT INTO scratch VALUES (1)")
            fail(conn)
            conn.execute("INSERT INTO scratch VALUES (3)")  # skipped after a refusal
        assert conn.info.transaction_status == TransactionStatus.IDLE
        assert conn.execute("SELECT count(*) FROM scratch").fetchone() == (0,)
        with pipelined_transaction(conn):
            conn.execute("INSERT INTO scratch VALUES (2)")
        assert conn.execute("SELECT x FROM scratch").fetchall() == [(2,)]


def test_derived_transactions_do_not_wait_for_the_disk_and_others_do(
    runtime: Runtime, tenant: Tenant
) -> None:
    datastore = runtime.log.datastore
    for durable, pipelined, expected in (
        (False, False, "off"),
        (False, True, "off"),
        (True, False, "on"),
        (True, True, "on"),
    ):
        with tenant_transaction(
            datastore, tenant.id, commit=True, pipelined=pipelined, durable=durable
        ) as cur:
            cur.execute("SELECT current_setting('synchronous_commit') AS setting")
            assert cur.fetchone() == {"setting": expected}, (durable, pipelined)
