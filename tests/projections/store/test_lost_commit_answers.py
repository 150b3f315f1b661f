"""A write whose ``COMMIT`` committed but whose answer never came is recorded once.

PostgreSQL is made to hold every ``COMMIT`` of a write until a synchronous standby
confirms it (``synchronous_standby_names`` names one that never connects): the
transaction is committed locally, its answer not yet sent. A thread of the test
then ends each such backend (``pg_terminate_backend``): the commit stands, the
writer reads "terminating connection" where ``COMMIT``'s answer should be. Every
path a write takes must settle that unknown outcome (is the backend gone, and are
the write's events in the log?) rather than try the write again blindly: a blind
retry met its own events' unique key, read that as another writer's win, built the
write again with new ids and recorded it twice.

Each test runs twice: as the service tells the lost answer (``told``), and as if it
could not (``untold``: the loss taken for a failure before ``COMMIT``), where the
write tried again must find its own earlier commit behind the unique key that
refuses it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store import _pipelined as pipelined
from palimpsest.projections.store import queued
from palimpsest.projections.store.eventlog import GROUP_MAX_EVENTS
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.conftest import (
    Tenant,
    count_events,
    fact_spec,
    library_writer,
    logged_position,
    wait_until,
)


@pytest.fixture(params=["told", "untold"])
def telling(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Whether the service recognises a connection lost once ``COMMIT`` was sent."""
    if request.param == "untold":

        def never(*_: object) -> bool:
            return False

        monkeypatch.setattr(pipelined, "connection_lost", never)
        monkeypatch.setattr(queued, "connection_lost", never)
    return str(request.param)


@contextmanager
def commit_answers_lost(runtime: Runtime, times: int) -> Iterator[list[int]]:
    """Within the block, the next ``times`` transactions that write (with
    ``synchronous_commit`` on) commit and their backends are then terminated before
    they answer; yield the pids terminated so far. Later commits are answered."""
    terminated: list[int] = []
    done = threading.Event()

    def terminate_waiters() -> None:
        with runtime.database.owner_connection(autocommit=True) as conn:
            while not done.is_set() and len(terminated) < times:
                rows = conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
                    " AND usename = %s",
                    (runtime.database.app_user,),
                ).fetchall()
                for (pid,) in rows:
                    conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    terminated.append(int(pid))
                time.sleep(0.02)
        _standby_names(runtime, None)  # (one waiting now commits, and is answered)

    _standby_names(runtime, "'nowhere'")
    terminator = threading.Thread(target=terminate_waiters)
    terminator.start()
    try:
        yield terminated
    finally:
        done.set()
        terminator.join(30)
        _standby_names(runtime, None)


def _standby_names(runtime: Runtime, names: str | None) -> None:
    """Set (or reset) ``synchronous_standby_names`` and wait until new sessions see it."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        try:
            if names is None:
                conn.execute("ALTER SYSTEM RESET synchronous_standby_names")
            else:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = {names}")
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the server's settings are not the test's to change (DATABASE_URL)")
        conn.execute("SELECT pg_reload_conf()")
    want = "" if names is None else names.strip("'")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with runtime.database.owner_connection(autocommit=True) as conn:
            row = conn.execute("SHOW synchronous_standby_names").fetchone()
        if row and row[0] == want:
            return
        time.sleep(0.05)
    pytest.fail("the server did not take the new synchronous_standby_names")


def _memories_in_log(runtime: Runtime, tenant: Tenant) -> list[uuid.UUID]:
    """Every memory created in the tenant's log, once per ``MemoryCreated`` event."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT originator_id FROM "{runtime.database.schema}".{EVENTS_TABLE}'
            " WHERE tenant_id = %s AND topic = 'palimpsest:MemoryCreated'"
            " ORDER BY notification_id",
            (tenant.id,),
        ).fetchall()
    return [row[0] for row in rows]


def test_a_batch_too_large_for_one_round_trip_is_recorded_once_when_commits_answer_is_lost(
    runtime: Runtime, client: TestClient, tenant: Tenant, telling: str
) -> None:
    items: list[dict[str, Any]] = [
        {"op": "create_memory", "type": "note", "scope": "user", "content": f"note {i}"}
        for i in range(40)
    ]
    with commit_answers_lost(runtime, times=1) as terminated:
        response = client.post("/v1/batch", json={"items": items}, headers=tenant.headers())
    assert len(terminated) == 1, "no COMMIT's answer was lost: the test did not test"
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    assert 2 * len(results) > GROUP_MAX_EVENTS  # the write of more than one round trip
    in_log = _memories_in_log(runtime, tenant)
    assert sorted(in_log) == sorted(uuid.UUID(r["id"]) for r in results)
    for result in results:
        assert logged_position(runtime, result["id"]) == result["position"]


def test_a_group_written_one_write_at_a_time_is_recorded_once_when_commits_answer_is_lost(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch, telling: str
) -> None:
    # A group the database refuses as one (two writes under one Idempotency-Key) is
    # written again one savepoint per write, in a transaction of its own.
    monkeypatch.setattr(runtime.log.group, "ahead", 0)
    runtime.log.group.sizes.clear()
    isolated = runtime.log.recorder.isolated_groups  # type: ignore[attr-defined]
    caller = authenticate(runtime.log, tenant.admin.token)
    answers: dict[str, Any] = {}

    def write(name: str, key: str | None) -> threading.Thread:
        idempotency = None if key is None else (key, "the same request")
        content = "under one key" if key else f"written by {name}"

        def run() -> None:
            try:
                outcome = library_writer(runtime).write(
                    caller, [fact_spec(content)], batch=False, idempotency=idempotency
                )
                answers[name] = outcome.body
            except Exception as e:  # recorded, asserted below
                answers[name] = e

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    schema = runtime.database.schema
    with commit_answers_lost(runtime, times=2) as terminated:
        with runtime.database.owner_connection() as table:
            table.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
            threads = [write("first", None)]
            _until_waiting_for_the_lock(runtime)
            threads += [write("keyed 1", "k"), write("keyed 2", "k")]
            threads += [write(f"plain {i}", None) for i in range(2)]
            wait_until(lambda: runtime.log.group.queued == 4, 30, "four queue behind the first")
        for thread in threads:
            thread.join(90)
    assert not any(thread.is_alive() for thread in threads)

    assert len(terminated) == 2, terminated  # the first's COMMIT, and the group's
    assert list(runtime.log.group.sizes) == [4]
    # Told, the lost answer is settled; untold, the group is tried again (and refused
    # as one again, by its own events this time).
    tries = 1 if telling == "told" else 2
    assert runtime.log.recorder.isolated_groups == isolated + tries  # type: ignore[attr-defined]
    assert all(isinstance(answer, dict) for answer in answers.values()), answers
    assert answers["keyed 1"] == answers["keyed 2"]
    answered = {answer["id"]: answer["position"] for answer in answers.values()}
    in_log = _memories_in_log(runtime, tenant)
    assert sorted(in_log) == sorted(uuid.UUID(i) for i in answered)  # each once
    for memory_id, position in answered.items():
        assert logged_position(runtime, memory_id) == position
    assert count_events(runtime, tenant, "MemoryCreated") == 4


def _until_waiting_for_the_lock(runtime: Runtime) -> None:
    deadline = time.monotonic() + 30
    with runtime.database.owner_connection(autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND usename = %s AND query LIKE 'LOCK TABLE%%'",
                (runtime.database.app_user,),
            ).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    pytest.fail("the first write never waited for the events table's lock")
