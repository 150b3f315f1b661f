"""``serve`` with ``PALIMPSEST_DRAIN_PROCESS=1``: the drains run in a process of their
own, which ``serve`` starts again when it is killed, and which never outlives it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx2
import psutil
import pytest

from palimpsest.api.cli._exit_code import EXIT_USAGE
from palimpsest.api.cli._serve import DRAIN_NICENESS
from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import (
    assert_setting_refused_before_writing,
    published,
    refused_serve,
    serve_env,
    start_serve,
    stop_serve,
    until,
)
from tests.conftest import Tenant
from tests.projections.drains.killing import drain_owners


@pytest.mark.slow
def test_the_drains_run_apart_are_started_again_when_killed_and_end_with_serve(
    runtime: Runtime, tenant: Tenant
) -> None:
    server, base = start_serve(runtime, settings={"PALIMPSEST_DRAIN_PROCESS": "1"})
    headers = tenant.headers()

    def children() -> set[int]:
        return {c.pid for c in psutil.Process(server.pid).children()}

    def readiness() -> str:
        return str(httpx2.get(f"{base}/readyz", timeout=5).json()["checks"]["drains"])

    try:
        # The drains are a child of serve's, not serve's HTTP process, which sees it.
        until(lambda: len(drain_owners(runtime)) == 1, 60, "a process drains")
        [owner] = drain_owners(runtime)
        assert owner in children() and owner != server.pid
        assert readiness() == "ok"
        # Requests first: the drains yield the CPU to the serving processes.
        assert psutil.Process(owner).nice() == psutil.Process(server.pid).nice() + DRAIN_NICENESS
        published(base, headers, "drained apart")

        os.kill(owner, signal.SIGKILL)
        until(
            lambda: len(owners := drain_owners(runtime)) == 1 and owners[0] != owner,
            60,
            "serve starts the drains again",
        )
        [again] = drain_owners(runtime)
        assert again in children() and readiness() == "ok"
        published(base, headers, "drained by the new process")

        # Stopped, serve stops its drain process too.
        os.kill(server.pid, signal.SIGTERM)
        server.wait(60)
        until(lambda: not psutil.pid_exists(again), 30, "the drain process exits")
        until(lambda: drain_owners(runtime) == [], 30, "nothing drains")
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(30)


@pytest.mark.slow
def test_a_bad_setting_of_the_daily_jobs_stops_serve_before_any_drain_process(
    runtime: Runtime,
) -> None:
    env = serve_env(
        runtime,
        {
            "PALIMPSEST_DRAIN_PROCESS": "1",
            "PALIMPSEST_FORGETTING_PASS_ENABLED": "true",
            "PALIMPSEST_FORGETTING_PASS_CRON": "every day at dawn",
        },
    )
    # The drain process would read it; serve reads it first, and says so in one line.
    done = refused_serve(env)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "PALIMPSEST_FORGETTING_PASS_CRON" in done.stderr.strip().splitlines()[-1]
    assert drain_owners(runtime) == []


@pytest.mark.slow
def test_a_drain_process_setting_that_is_not_a_boolean_stops_serve_before_it_writes(
    tmp_path: Path,
) -> None:
    assert_setting_refused_before_writing(tmp_path / "store", "PALIMPSEST_DRAIN_PROCESS", "maybe")


@pytest.mark.slow
def test_the_http_processes_of_workers_n_see_whether_the_drain_process_runs(
    runtime: Runtime,
) -> None:
    apart = {"PALIMPSEST_DRAIN_PROCESS": "1"}
    server, base = start_serve(runtime, "--workers", "2", settings=apart)

    def readiness() -> set[str]:
        """The drains' check as several connections see it (spread over both processes)."""
        return {
            str(httpx2.get(f"{base}/readyz", timeout=5).json()["checks"]["drains"])
            for _ in range(8)
        }

    try:
        until(lambda: len(drain_owners(runtime)) == 1, 60, "a process drains")
        assert readiness() == {"ok"}
        # serve stopped (its HTTP processes go on), and its drain process killed: nobody
        # holds the drains' lock, nobody starts them again.
        [owner] = drain_owners(runtime)
        os.kill(server.pid, signal.SIGSTOP)
        os.kill(owner, signal.SIGKILL)
        until(lambda: drain_owners(runtime) == [], 30, "nothing drains")
        assert readiness() == {"missing"}
        os.kill(server.pid, signal.SIGCONT)
        until(lambda: readiness() == {"ok"}, 60, "the drains run again")
    finally:
        os.kill(server.pid, signal.SIGCONT)
        stop_serve(server)
