"""Waiting for the drains: a notice is never lost between the first check and the wait;
and the writes announced to event streams."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

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


def test_only_a_write_that_succeeded_is_announced_to_its_tenants_streams(
    client: TestClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An event stream wakes at each write of this process that its tenant made;
    # a read, a refused write or a write of nobody wakes none.
    woken: list[UUID] = []
    monkeypatch.setattr(client.app.state.writes, "wake", woken.append)  # type: ignore[attr-defined]
    headers = tenant.headers()
    memory = {"type": "fact", "scope": "user", "content": "Lives in Lyon"}
    refused = [
        client.get("/v1/memories", headers=headers),
        client.post("/v1/memories", json={**memory, "type": "opinion"}, headers=headers),
        client.post("/v1/memories", json=memory),
        client.post(
            "/v1/memories",
            content=b'{"content": "a", "content": "b"}',
            headers={**headers, "Content-Type": "application/json"},
        ),
    ]
    assert [r.status_code for r in refused] == [200, 422, 401, 400]
    assert woken == []
    written = [
        client.post("/v1/memories", json=memory, headers=headers),
        client.post("/v1/observations", json={"content": "seen"}, headers=headers),
    ]
    assert [w.status_code for w in written] == [201, 201]
    assert woken == [tenant.id, tenant.id]
