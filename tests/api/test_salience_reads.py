"""Demotion is ranking only: reads by id stamp accesses and report a bounded salience
score, listings and waits stamp nothing, and nothing else changes."""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.access_buffer import flush_accesses
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up


def _accesses(runtime: Runtime, memory_id: str) -> int:
    """The accesses the table holds, once this process's buffered stamps are written."""
    flush_accesses(runtime.log)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT accesses FROM "{schema}".memory_access WHERE memory_id = %s', (memory_id,)
        ).fetchone()
    return int(row[0]) if row else 0


def _expected(confidence: float, accesses: int) -> float:
    """The documented score of a memory just recorded (no decay yet)."""
    s = confidence * (1 + math.log1p(accesses))
    return s / (1 + s)


def test_reads_by_id_stamp_accesses_and_listings_do_not(
    client: TestClient, tenant: Tenant, runtime: Runtime, snapshot: Any
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers, type="fact")
    drain_until_caught_up(runtime)
    head = snapshot()["log_head"]

    first = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    second = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert _accesses(runtime, memory["id"]) == 2
    assert 1 > second["salience"] > first["salience"] > 0  # one more access ranks higher
    confidence = first["belief"]["confidence"]
    assert first["salience"] == pytest.approx(_expected(confidence, 0), abs=1e-4)
    assert second["salience"] == pytest.approx(_expected(confidence, 1), abs=1e-4)
    assert second["belief"] == first["belief"]  # and changes no label

    for _ in range(3):  # browsing is not use
        listed = client.get("/v1/memories", headers=headers).json()["items"]
        assert listed[0]["salience"] == pytest.approx(_expected(confidence, 2), abs=1e-4)
    assert _accesses(runtime, memory["id"]) == 2
    by_ids = client.get("/v1/memories/batch", headers=headers, params={"ids": memory["id"]}).json()
    assert by_ids["items"][0]["salience"] > second["salience"]
    assert _accesses(runtime, memory["id"]) == 3  # a read by id is use

    as_of = client.get(
        f"/v1/memories/{memory['id']}", headers=headers, params={"at_position": memory["position"]}
    ).json()
    assert "salience" not in as_of and _accesses(runtime, memory["id"]) == 3  # history is not use

    assert snapshot()["log_head"] == head  # never an event
    assert verify(runtime.database, tenant=tenant.id).divergences == []  # nor a read model


def test_a_read_that_waits_counts_once_however_often_it_polls(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers, type="fact")
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            client.get(f"/v1/memories/{memory['id']}", headers=headers, params={"wait": 10})
        )
    )
    waiting.start()
    time.sleep(0.5)  # many polls of 20 ms while nothing is published
    drain_until_caught_up(runtime)
    waiting.join(15)
    assert answers and answers[0].json()["status"] == "current"
    assert _accesses(runtime, memory["id"]) == 1


def test_salience_stays_bounded_however_often_read_and_a_pin_is_a_label(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    fact = remember(client, headers, type="fact", content="read often")
    pinned = remember(client, headers, type="preference", content="pinned")
    post(client, f"/v1/memories/{pinned['id']}/pin", {}, headers)
    drain_until_caught_up(runtime)
    read = [client.get(f"/v1/memories/{fact['id']}", headers=headers).json() for _ in range(60)]
    scores = [r["salience"] for r in read]
    assert scores == sorted(scores) and 0 < scores[-1] < 1  # rises with use, never past 1
    top = client.get(f"/v1/memories/{pinned['id']}", headers=headers).json()
    assert top["belief"]["labels"]["pinned"] is True
    assert 0 < top["salience"] < 1  # the pin is a label, not a number in the billions
    confidence = top["belief"]["confidence"]
    assert top["salience"] == pytest.approx(_expected(confidence, 0), abs=1e-4)


def test_salience_decays_with_time(client: TestClient, tenant: Tenant, runtime: Runtime) -> None:
    headers = tenant.headers()
    fact = remember(client, headers, type="fact", content="decays")
    drain_until_caught_up(runtime)
    now = client.get(f"/v1/memories/{fact['id']}", headers=headers).json()["salience"]
    year = datetime.now(UTC) + timedelta(days=365)
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: year)) as later:
        then = later.get(f"/v1/memories/{fact['id']}", headers=headers).json()["salience"]
    # A fact's half-life is a year; one more access offsets part of it.
    assert 0 < then < now < 1


def test_a_pending_read_counts_no_access(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a memory whose revision has not caught up
    headers = tenant.headers()
    memory = remember(client, headers, type="fact")
    # When it is read by id before the drain runs
    pending = client.get(f"/v1/memories/{memory['id']}", headers=headers)
    # Then the answer is pending, and the read served nothing to use: no access
    assert pending.json()["status"] == "pending" and pending.headers["Retry-After"] == "1"
    assert _accesses(runtime, memory["id"]) == 0
    drain_until_caught_up(runtime)
    current = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    confidence = current["belief"]["confidence"]
    assert current["salience"] == pytest.approx(_expected(confidence, 0), abs=1e-4)
    assert _accesses(runtime, memory["id"]) == 1
