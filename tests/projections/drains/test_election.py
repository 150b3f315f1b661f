"""The drain loop runs in exactly one of several processes, and another of them
takes over when its owner is killed (nothing restarts the owner here, unlike
``serve --workers``, whose supervisor does: tests/api/cli/test_serve_workers.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta

import pytest

from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant, wait_until
from tests.projections.drains.killing import drain_owners, drain_process

_CONTEND = """
import time
from palimpsest.projections.drains.loop import DrainLoop, ElectedDrains
election = ElectedDrains(log, lambda: DrainLoop(log, sweep_s=0.2), retry_s=0.2)
election.start()
while True:
    time.sleep(1)
"""


def _published(runtime: Runtime, tenant: Tenant) -> bool:
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".revisions'
            " WHERE tenant_id = %s AND published < requested",
            (tenant.id,),
        ).fetchone()
    return row == (0,)


def _write_note(runtime: Runtime, tenant: Tenant, content: str) -> None:
    """Write a note from this process, which runs no drain."""
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, tenant.admin.token)
    spec = MemorySpec("note", "user", None, None, content, (), None, 1.0)
    writer.write(caller, [spec], batch=False)


@pytest.mark.slow
def test_one_process_drains_and_another_takes_over_when_it_is_killed(
    runtime: Runtime, tenant: Tenant
) -> None:
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes = [drain_process(runtime, _CONTEND) for _ in range(3)]
        pids = {p.pid for p in processes}
        wait_until(lambda: len(drain_owners(runtime)) == 1, 60, "one process drains")
        for _ in range(10):  # and only one, for a while
            assert len(drain_owners(runtime)) == 1
            time.sleep(0.05)
        [owner] = drain_owners(runtime)
        assert owner in pids

        os.killpg(owner, signal.SIGKILL)
        wait_until(
            lambda: len(owners := drain_owners(runtime)) == 1 and owners[0] != owner,
            30,
            "another process drains",
        )
        assert drain_owners(runtime)[0] in pids - {owner}

        # The new owner drains: a write is published without anyone draining here.
        _write_note(runtime, tenant, "drained elsewhere")
        wait_until(lambda: _published(runtime, tenant), 30, "the write is published")
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)


_CONTEND_SLOWLY = """
import time
from palimpsest.projections.drains.loop import DrainLoop, ElectedDrains
election = ElectedDrains(log, lambda: DrainLoop(log, sweep_s=120), retry_s=30)
election.start()
while True:
    time.sleep(1)
"""


@pytest.mark.slow
def test_a_write_in_another_process_wakes_the_drains_as_it_commits(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a process that drains, sweeping every 2 minutes and looking at its lock
    # every 30 s: only the NOTIFY of a write can make it publish one soon.
    process = drain_process(runtime, _CONTEND_SLOWLY)
    try:
        wait_until(lambda: drain_owners(runtime) == [process.pid], 60, "the process drains")
        time.sleep(1)  # it LISTENs right after taking the lock
        _write_note(runtime, tenant, "published at once")
        # Published within seconds, not when the listener next stops listening (30 s).
        wait_until(lambda: _published(runtime, tenant), 10, "the write is published")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
