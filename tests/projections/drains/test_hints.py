"""Post-commit hints are best effort: a broker outage never turns a committed write
into an error (a client without an Idempotency-Key would retry and duplicate it)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.hints import DRAIN_QUEUE, broker_for, send_drain_hint
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post
from tests.conftest import Tenant, count_events
from tests.projections.drains.private_redis import private_redis


def _unsent(client: TestClient) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'palimpsest_hints_unsent_total{{queue="{DRAIN_QUEUE}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_write_committed_while_the_broker_is_down_answers_success(
    runtime: Runtime, tenant: Tenant, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    headers = tenant.headers()
    body = {"type": "note", "scope": "s", "content": "written while the broker is down"}
    with private_redis(tmp_path) as server:
        broker = broker_for(server.url)
        app = create_app(ApiSettings(), runtime, wake=lambda: send_drain_hint(broker))
        with TestClient(app, raise_server_exceptions=False) as client:
            # Given hints reaching a real Redis
            assert (
                post(client, "/v1/memories", {**body, "content": "before"}, headers).status_code
                == 201
            )
            assert server.queue_length(DRAIN_QUEUE) == 1
            unsent_before = _unsent(client)
            # When the broker goes down mid-run and a write commits
            server.stop()
            with caplog.at_level(logging.WARNING, logger="palimpsest.projections.drains.hints"):
                written = post(client, "/v1/memories", body, headers)
            # Then the write answers its normal success, once
            assert written.status_code == 201, written.text
            assert count_events(runtime, tenant, "MemoryCreated") == 2
            # And the lost hint is a structured log line and a counted metric
            lost = [r for r in caplog.records if r.getMessage() == "drain hint not sent"]
            assert len(lost) == 1
            assert lost[0].__dict__["queue"] == DRAIN_QUEUE
            assert lost[0].__dict__["error"]
            assert _unsent(client) == unsent_before + 1
            # And once the broker is back, hints flow again
            server.start()
            again = post(client, "/v1/memories", {**body, "content": "after"}, headers)
            assert again.status_code == 201
            assert server.queue_length(DRAIN_QUEUE) == 1  # a fresh server: only the new hint
            assert _unsent(client) == unsent_before + 1
