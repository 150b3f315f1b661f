"""``palimpsest serve --workers 2``: two HTTP processes, exactly one of them drains,
and the other takes the drains over when that one is killed."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import published, start_serve, stop_serve, until
from tests.conftest import Tenant
from tests.projections.drains.killing import drain_owners


@pytest.mark.slow
def test_two_workers_serve_one_drains_and_another_takes_over_when_it_is_killed(
    runtime: Runtime, tenant: Tenant
) -> None:
    server, base = start_serve(runtime, "--workers", "2")
    headers = tenant.headers()

    def workers() -> set[int]:
        return {c.pid for c in psutil.Process(server.pid).children()}

    try:
        until(
            lambda: len(drain_owners(runtime)) == 1,
            60,
            f"one drains: {workers()} {drain_owners(runtime)}",
        )
        [owner] = drain_owners(runtime)
        assert owner in workers()
        for _ in range(10):  # and only one, for a while
            assert drain_owners(runtime) == [owner]
            time.sleep(0.05)

        os.kill(owner, signal.SIGKILL)
        until(
            lambda: len(owners := drain_owners(runtime)) == 1 and owners[0] != owner,
            30,
            "another worker drains",
        )
        # Whichever process serves it, a write is published by the new owner.
        published(base, headers, "drained by the new owner")
    finally:
        stop_serve(server)
