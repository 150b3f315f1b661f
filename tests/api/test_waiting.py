"""Waiting for the drains: a notice is never lost between the first check and the wait."""

from __future__ import annotations

import asyncio
import time

from palimpsest.api._waiting import await_drains
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant


def test_a_first_answer_taken_before_subscribing_is_checked_again_once_subscribed(
    runtime: Runtime, tenant: Tenant
) -> None:
    # A recall's route checks whether the caller's writes are indexed before it
    # subscribes to the tenant's publication notices. When the drains publish in
    # between, the notice is gone: the wait must not sit until its next recheck
    # (5 s), which read-your-writes trials met as 3-4.7 s recalls.
    runtime.publications.start()
    assert runtime.publications.listening.wait(10)  # its (re)connection wakes every waiter
    checks: list[float] = []

    def check() -> bool:
        checks.append(time.monotonic())
        return True  # published since the first answer, whose notice came before

    started = time.monotonic()
    answer = asyncio.run(await_drains(runtime, tenant.id, check, bool, wait_s=3.0, first=False))
    assert answer is True
    assert len(checks) == 1
    assert checks[0] - started < 1.0  # checked again at once, not after a recheck
