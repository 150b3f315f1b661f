"""A real ``palimpsest serve`` killed with SIGKILL in the middle of a group commit:
every write it acknowledged is in the log, whole, and the group is all or nothing."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any
from uuid import UUID

import httpx2
import pytest

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.conftest import Tenant, wait_until
from tests.projections.drains.killing import database_url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(runtime: Runtime, port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
    env["DATABASE_URL"] = database_url(runtime)
    process = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.api.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def healthy() -> bool:
        assert process.poll() is None, process.communicate()[1]
        try:
            return httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except httpx2.TransportError:
            return False

    wait_until(healthy, 90, "palimpsest serve is healthy")
    return process


def _waiting_on_lock(runtime: Runtime, table: str) -> bool:
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND usename = %s AND query LIKE %s",
            (runtime.database.app_user, f"%{table}%"),
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.slow
def test_a_kill_mid_group_loses_no_acknowledged_write_and_leaves_none_half_written(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    port = _free_port()
    server = _serve(runtime, port)
    schema = runtime.database.schema
    answers: dict[str, Any] = {}

    def post(name: str, who: Tenant) -> threading.Thread:
        def run() -> None:
            try:
                answers[name] = httpx2.post(
                    f"http://127.0.0.1:{port}/v1/memories",
                    json={"type": "note", "scope": "user", "content": f"written by {name}"},
                    headers=who.headers(),
                    timeout=60,
                )
            except httpx2.TransportError as e:
                answers[name] = e

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    try:
        with (
            runtime.database.owner_connection() as table_holder,
            runtime.database.owner_connection() as row_holder,
        ):
            # The first write waits for the events table; six more queue behind it
            # (three of each tenant), to be committed as one group.
            table_holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
            threads = [post("first", tenant)]
            wait_until(lambda: _waiting_on_lock(runtime, EVENTS_TABLE), 30, "the first write waits")
            threads += [post(f"a{i}", tenant) for i in range(3)]
            time.sleep(0.5)  # the first tenant's writes first in the group
            threads += [post(f"b{i}", other_tenant) for i in range(3)]
            time.sleep(1.5)  # authenticated, built and queued (nothing to observe outside)
            # The group will stop at the other tenant's revision mark: hold its row.
            row_holder.execute(
                f'SELECT 1 FROM "{schema}".revision_tenants WHERE tenant_id = %s FOR UPDATE',
                (other_tenant.id,),
            )
            table_holder.commit()
            wait_until(lambda: "first" in answers, 30, "the first write is answered")
            wait_until(
                lambda: _waiting_on_lock(runtime, "revision_tenants"), 30, "the group is mid-way"
            )
            # Mid-group: the first tenant's writes inserted, the transaction open.
            server.send_signal(signal.SIGKILL)
            server.wait(30)
            row_holder.rollback()
        for thread in threads:
            thread.join(60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(30)
        if server.stderr is not None:
            server.stderr.close()

    first = answers.pop("first")
    assert isinstance(first, httpx2.Response) and first.status_code == 201, first
    # None of the group was acknowledged: the server died before the answers came
    # (its COMMIT was sent; PostgreSQL ran it once the row was free).
    assert all(not isinstance(a, httpx2.Response) for a in answers.values()), answers

    # The group's transaction was sent whole, its COMMIT included (one round trip):
    # once PostgreSQL has ended it, its six writes are in the log together or not
    # at all, each with both its events, and the acknowledged write is there. (A
    # write that got no answer may have happened, as with any database: a retry
    # with the same Idempotency-Key would replay it.)
    wait_until(lambda: not _waiting_on_lock(runtime, "revision_tenants"), 30, "the group ends")
    written = UUID(first.json()["id"])
    mine = _memories_in_log(runtime, tenant)
    assert mine.pop(written) == _BOTH
    group = mine | _memories_in_log(runtime, other_tenant)
    assert len(group) in (0, 6), group
    assert all(topics == _BOTH for topics in group.values()), group


_BOTH = ["palimpsest:MemoryCreated", "palimpsest:VersionRecorded"]
"""The events of a memory written whole."""


def _memories_in_log(runtime: Runtime, who: Tenant) -> dict[UUID, list[str]]:
    """Each aggregate of ``who`` in the log but the tenant, with its events' topics in order."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT originator_id, topic FROM "{runtime.database.schema}".{EVENTS_TABLE}'
            " WHERE tenant_id = %s AND topic LIKE 'palimpsest:%%' ORDER BY notification_id",
            (who.id,),
        ).fetchall()
    found: dict[UUID, list[str]] = {}
    for originator, topic in rows:
        if originator != who.id:  # the tenant's own events
            found.setdefault(originator, []).append(topic)
    return found
