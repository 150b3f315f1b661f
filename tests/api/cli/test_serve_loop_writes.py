"""``serve`` with ``PALIMPSEST_WRITES_ON_LOOP`` (off by default) runs a lone connection's
writes on its event loop (``palimpsest.api.worker_threads``), and never holds the loop for
another transaction's lock."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.cli.serving import (
    assert_setting_refused_before_writing,
    start_serve,
    stop_serve,
    until,
)
from tests.conftest import Tenant
from tests.projections.commands.test_group_commit import _waiting_on_lock

_ON_LOOP = {"PALIMPSEST_WRITES_ON_LOOP": "true"}


def _scraped(client: httpx2.Client) -> dict[str, float]:
    """The serving process's figures of interest here, by name (and outcome), scraped
    through ``client``'s connection."""
    figures: dict[str, float] = {}
    for line in client.get("/metrics").text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("palimpsest_writes_on_event_loop_total{outcome="):
            figures[name.split('"')[1]] = float(value)
        elif name == "palimpsest_http_connections":
            figures["connections"] = float(value)
    return figures


def _alone(client: httpx2.Client) -> None:
    """Wait until ``client``'s connection is the server's only one (the ones the test
    closed are gone on its side too)."""
    until(lambda: _scraped(client).get("connections") == 1, 10, "the other connections close")


def _note(client: httpx2.Client, content: str, kind: str = "note") -> Any:
    written = client.post("/v1/memories", json={"type": kind, "scope": "user", "content": content})
    assert written.status_code == 201, written.text
    return written.json()


@pytest.mark.slow
def test_a_lone_connections_writes_run_on_the_loop_and_others_hop(
    runtime: Runtime, tenant: Tenant
) -> None:
    server, base = start_serve(runtime, settings=_ON_LOOP)
    try:
        with httpx2.Client(base_url=base, headers=tenant.headers(), timeout=30) as lone:
            _alone(lone)
            note = _note(lone, "written on the loop")
            fact = _note(lone, "The build takes 4 minutes", "fact")
            version = lone.post(
                f"/v1/memories/{fact['id']}/versions", json={"content": "It takes 5 minutes"}
            )
            assert version.status_code == 201, version.text
            # Each answered as any write is, and read back as written.
            read = lone.get(f"/v1/memories/{note['id']}?wait=20").json()
            assert read["status"] == "current" and read["content"] == "written on the loop"
            read = lone.get(f"/v1/memories/{fact['id']}?wait=20").json()
            assert read["content"] == "It takes 5 minutes"
            assert _scraped(lone).get("ran") == 3

            # With a second connection open, a write goes to a worker thread as before.
            with httpx2.Client(base_url=base, headers=tenant.headers(), timeout=30) as second:
                assert _scraped(second).get("connections") == 2  # open, and kept open
                _note(lone, "written beside another connection")
                _note(second, "and another")
                assert _scraped(second) == {"connections": 2, "ran": 3}
    finally:
        stop_serve(server)


@pytest.mark.slow
def test_a_write_that_would_wait_for_a_lock_leaves_the_loop_to_other_connections(
    runtime: Runtime, tenant: Tenant
) -> None:
    server, base = start_serve(runtime, settings=_ON_LOOP)
    outcome: dict[str, Any] = {}
    schema = runtime.database.schema
    try:
        with (
            httpx2.Client(base_url=base, headers=tenant.headers(), timeout=60) as lone,
            runtime.database.owner_connection() as holder,
        ):
            _alone(lone)
            holder.execute(f'LOCK TABLE "{schema}".{EVENTS_TABLE} IN EXCLUSIVE MODE')
            writer = threading.Thread(
                target=lambda: outcome.update(
                    w=lone.post(
                        "/v1/memories",
                        json={"type": "note", "scope": "user", "content": "waited for the lock"},
                    )
                )
            )
            writer.start()
            until(lambda: _waiting_on_lock(runtime), 10, "the write waits for the table")
            time.sleep(0.2)  # ten times the loop's brief wait

            # The write waits on a worker thread: another connection is answered at once.
            with httpx2.Client(base_url=base, timeout=5) as other:
                started = time.monotonic()
                assert other.get("/healthz").status_code == 200
                assert time.monotonic() - started < 1.0
                assert _scraped(other).get("handed_to_thread") == 1
            assert "w" not in outcome
            holder.commit()
            writer.join(30)
            assert outcome["w"].status_code == 201, outcome["w"].text
            # It was not written on the loop.
            assert _scraped(lone) == {"connections": 1, "handed_to_thread": 1}
    finally:
        stop_serve(server)


@pytest.mark.slow
def test_writes_stay_off_the_loop_when_the_setting_says_so(
    runtime: Runtime, tenant: Tenant
) -> None:
    server, base = start_serve(runtime, settings={"PALIMPSEST_WRITES_ON_LOOP": "false"})
    try:
        with httpx2.Client(base_url=base, headers=tenant.headers(), timeout=30) as lone:
            note = _note(lone, "written on a worker thread")
            read = lone.get(f"/v1/memories/{note['id']}?wait=20").json()
            assert read["content"] == "written on a worker thread"
            # Uncounted connections: no write could run on the loop.
            assert _scraped(lone) == {}
    finally:
        stop_serve(server)


@pytest.mark.slow
def test_a_writes_on_loop_setting_that_is_not_a_boolean_stops_serve_before_it_writes(
    tmp_path: Path,
) -> None:
    assert_setting_refused_before_writing(tmp_path / "store", "PALIMPSEST_WRITES_ON_LOOP", "maybe")
