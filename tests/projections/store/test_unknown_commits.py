"""A write whose connection fails after its ``COMMIT`` was sent is recorded once.

The write waits for the events table's lock (the test holds it) with its whole
transaction sent; the test then breaks the writer's end of the connection. The
backend still holds the transaction: it commits once it has the lock, or, ended
by the test, never. Either way the writer must find out which before trying
again (a blind retry recorded the memory twice).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import psycopg
import pytest
from eventsourcing.persistence import OperationalError

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store import _recorder
from palimpsest.projections.store._pipelined import pipelined_transaction
from palimpsest.projections.store._unknown_commits import transaction_ended
from palimpsest.projections.store.errors import DatabaseUnavailableError
from palimpsest.projections.store.queued import send_queued
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.conftest import Tenant, count_events, library_writer, logged_position, wait_until


@pytest.fixture
def sending(monkeypatch: pytest.MonkeyPatch) -> list[psycopg.Connection[Any]]:
    """The connections of the event log's transactions sent in one round trip (through
    libpq's pipeline or psycopg's), in the order sent."""
    sent: list[psycopg.Connection[Any]] = []

    def recording(conn: psycopg.Connection[Any]) -> Any:
        sent.append(conn)
        return pipelined_transaction(conn)

    def recording_queued(conn: psycopg.Connection[Any], queued: Any, **kwargs: Any) -> Any:
        sent.append(conn)
        return send_queued(conn, queued, **kwargs)

    monkeypatch.setattr(_recorder, "pipelined_transaction", recording)
    monkeypatch.setattr(_recorder, "send_queued", recording_queued)
    return sent


@contextmanager
def _events_table_held(runtime: Runtime) -> Iterator[psycopg.Connection[Any]]:
    with runtime.database.owner_connection() as conn:
        conn.execute(f'LOCK TABLE "{runtime.database.schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
        yield conn


def _waiting_writer(runtime: Runtime, timeout_s: float = 30, *, other_than: int = 0) -> int:
    """Return the backend of the write waiting for the events table's lock (one other
    than backend ``other_than``)."""
    deadline = time.monotonic() + timeout_s
    with runtime.database.owner_connection(autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND usename = %s AND query LIKE 'LOCK TABLE%%' AND pid <> %s",
                (runtime.database.app_user, other_than),
            ).fetchone()
            if row:
                return int(row[0])
            time.sleep(0.05)
    pytest.fail("the write never waited for the events table's lock")


def _cut_off_write(
    runtime: Runtime,
    tenant: Tenant,
    sending: list[psycopg.Connection[Any]],
    meanwhile: Callable[[int], None],
) -> Any:
    """Write a memory whose transaction waits for the events table's lock (held here),
    shut the writer's end of its connection, run ``meanwhile`` with the backend's pid,
    release the lock; return the write's answer (its body, or what it raised)."""
    caller = authenticate(runtime.log, tenant.admin.token)
    answers: list[Any] = []

    def write() -> None:
        spec = MemorySpec("fact", "user", None, None, "the standup moved", (), None, 1.0)
        try:
            answers.append(library_writer(runtime).write(caller, [spec], batch=False).body)
        except Exception as e:  # recorded, asserted by the caller
            answers.append(e)

    with _events_table_held(runtime) as holder:
        writer = threading.Thread(target=write)
        writer.start()
        orphan = _waiting_writer(runtime)
        # The writer's end of its connection fails; the backend keeps what it received.
        end = socket.socket(fileno=sending[-1].fileno())
        end.shutdown(socket.SHUT_RDWR)
        end.detach()
        time.sleep(0.5)  # the writer notices, and waits for the transaction's end
        meanwhile(orphan)
        holder.commit()
        writer.join(60)
    assert not writer.is_alive()
    [answer] = answers
    return answer


def _no_more(orphan: int) -> None:
    """Leave the backend alone: it commits once it has the lock."""


def _terminate(runtime: Runtime, orphan: int) -> None:
    with runtime.database.owner_connection(autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (orphan,))
    # The writer, seeing its transaction end uncommitted, retries on a new backend
    # that waits for the lock in its turn.
    _waiting_writer(runtime, other_than=orphan)


@pytest.mark.parametrize("outcome", ["committed", "ended-uncommitted"])
def test_a_write_whose_connection_fails_after_commit_was_sent_is_recorded_once(
    runtime: Runtime, tenant: Tenant, sending: list[psycopg.Connection[Any]], outcome: str
) -> None:
    meanwhile = partial(_terminate, runtime) if outcome == "ended-uncommitted" else _no_more
    answer = _cut_off_write(runtime, tenant, sending, meanwhile)
    assert isinstance(answer, dict), answer
    assert count_events(runtime, tenant, "MemoryCreated") == 1
    assert logged_position(runtime, answer["id"]) == answer["position"]


def test_a_write_whose_outcome_cannot_be_learnt_answers_unavailable_and_is_not_tried_again(
    runtime: Runtime,
    tenant: Tenant,
    sending: list[psycopg.Connection[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreachable(*_: object) -> bool:
        msg = "the database does not answer"
        raise OperationalError(msg)

    monkeypatch.setattr(_recorder, "transaction_ended", unreachable)
    orphans: list[int] = []
    answer = _cut_off_write(runtime, tenant, sending, orphans.append)
    assert isinstance(answer, DatabaseUnavailableError), answer
    # The backend committed it once it had the lock (the writer, answered at once,
    # did not wait for that); nothing tried it again.
    assert transaction_ended(runtime.log.datastore, orphans[0], 30)
    assert count_events(runtime, tenant, "MemoryCreated") == 1


def test_a_group_whose_connection_fails_after_commit_was_sent_is_recorded_once(
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    sending: list[psycopg.Connection[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: dict[str, Any] = {}
    # The three writes behind the first queue for one group (none is sent ahead).
    monkeypatch.setattr(runtime.log.group, "ahead", 0)
    runtime.log.group.sizes.clear()

    def write(name: str, who: Tenant) -> threading.Thread:
        caller = authenticate(runtime.log, who.admin.token)

        def run() -> None:
            spec = MemorySpec("fact", "user", None, None, f"written by {name}", (), None, 1.0)
            try:
                answers[name] = library_writer(runtime).write(caller, [spec], batch=False).body
            except Exception as e:  # recorded, asserted below
                answers[name] = e

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    schema = runtime.database.schema
    with _events_table_held(runtime) as table, runtime.database.owner_connection() as row:
        threads = [write("first", tenant)]
        _waiting_writer(runtime)
        threads += [write(f"group {i}", other_tenant) for i in range(3)]
        wait_until(lambda: runtime.log.group.queued == 3, 30, "the three queue behind the first")
        # The group will wait for the other tenant's row, its whole transaction sent.
        row.execute(
            f'SELECT 1 FROM "{schema}".revision_tenants WHERE tenant_id = %s FOR UPDATE',
            (other_tenant.id,),
        )
        table.commit()
        wait_until(
            lambda: "first" in answers and len(sending) >= 2 and _waits_on_row(runtime),
            30,
            "the group, sent whole, waits for the row",
        )
        end = socket.socket(fileno=sending[-1].fileno())
        end.shutdown(socket.SHUT_RDWR)
        end.detach()
        time.sleep(0.5)  # the group's leader notices, and waits for the transaction's end
        row.rollback()
        for thread in threads:
            thread.join(60)

    assert all(isinstance(answer, dict) for answer in answers.values()), answers
    assert len(answers) == 4
    assert count_events(runtime, other_tenant, "MemoryCreated") == 3
    assert list(runtime.log.group.sizes) == [3]  # the three, as one transaction


def _waits_on_row(runtime: Runtime) -> bool:
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND usename = %s AND query LIKE '%%revision_tenants%%'",
            (runtime.database.app_user,),
        ).fetchone()
    return bool(row and row[0])
