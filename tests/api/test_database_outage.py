"""A database outage under load: bounded 503s, then every acknowledged write.

The test runs its own embedded PostgreSQL (whatever ``DATABASE_URL`` says),
stops it with ``pg_ctl`` while writers and readers keep going, and starts
it again. While it is down every request answers 503 ``database-unavailable``
with ``Retry-After`` within a bounded time, never a 500; afterwards every
write that was acknowledged (201) is there, and no write is there twice (a write
whose ``COMMIT`` went out as the server stopped may have committed: it is settled,
never tried again blindly).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.eventlog import WRITE_ATTEMPTS
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import problem_slug
from tests.embedded_server import own_server, start, stop

WAIT_S = 2
"""``PALIMPSEST_DB_WAIT_S`` for this test's service."""
BOUND_S = WRITE_ATTEMPTS * (WAIT_S + 1) + 2
"""Longest an answer may take during the outage (docs/configuration.md)."""


@pytest.fixture
def own_runtime(tmp_path: Path) -> Iterator[Runtime]:
    with own_server(tmp_path, db_wait_s=WAIT_S) as runtime:
        yield runtime


class Load:
    """Writers and readers on real threads, recording every answer."""

    def __init__(self, client: TestClient, headers: dict[str, str]) -> None:
        self.client = client
        self.headers = headers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answers: list[tuple[str, int, float, Any]] = []
        self.acknowledged: list[str] = []
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(3)]
        self.threads.append(threading.Thread(target=self._read))

    def _record(self, kind: str, started: float, response: Any) -> None:
        with self.lock:
            self.answers.append((kind, response.status_code, time.monotonic() - started, response))

    def _write(self, writer: int) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            started = time.monotonic()
            response = self.client.post(
                "/v1/observations",
                json={"content": f"writer {writer} note {n}"},
                headers=self.headers,
            )
            self._record("write", started, response)
            if response.status_code == 201:
                with self.lock:
                    self.acknowledged.append(response.json()["id"])
            else:
                time.sleep(0.05)

    def _read(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            response = self.client.get("/v1/memories", headers=self.headers)
            self._record("read", started, response)
            time.sleep(0.05)

    def since(self, mark: int) -> list[tuple[str, int, float, Any]]:
        with self.lock:
            return self.answers[mark:]

    def mark(self) -> int:
        with self.lock:
            return len(self.answers)

    def wait_for(self, kind: str, status: int, mark: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(k == kind and s == status for k, s, _, _ in self.since(mark)):
                return True
            time.sleep(0.1)
        return False


@pytest.mark.slow
def test_an_outage_answers_bounded_503s_and_loses_no_acknowledged_write(
    own_runtime: Runtime,
) -> None:
    admin = create_tenant(own_runtime.log, "outage")
    headers = {"Authorization": f"Bearer {admin.token}"}
    with TestClient(create_app(ApiSettings(), own_runtime)) as client:
        load = Load(client, headers)
        for t in load.threads:
            t.start()
        try:
            assert load.wait_for("write", 201, 0, 30), "no write succeeded before the outage"
            stop(own_runtime)
            down = load.mark()
            assert load.wait_for("write", 503, down, BOUND_S * 2), "writes never answered 503"
            assert load.wait_for("read", 503, down, BOUND_S * 2), "reads never answered 503"
            time.sleep(WAIT_S)  # a few more requests meet the outage
            start(own_runtime)
            up = load.mark()
            assert load.wait_for("write", 201, up, 60), "writes did not recover"
            assert load.wait_for("read", 200, up, 60), "reads did not recover"
        finally:
            load.stop.set()
            for t in load.threads:
                t.join(timeout=60)

        during = load.since(down)[: up - down]
        statuses = {(kind, status) for kind, status, _, _ in load.answers}
        assert not any(s >= 500 and s != 503 for _, s in statuses), statuses
        unavailable = [a for a in during if a[1] == 503]
        assert unavailable
        for _, _, elapsed, response in unavailable:
            assert problem_slug(response) == "database-unavailable"
            assert int(response.headers["Retry-After"]) > 0
            assert elapsed < BOUND_S, f"a 503 took {elapsed:.1f} s (bound {BOUND_S} s)"

        missing = [
            i
            for i in load.acknowledged
            if client.get(f"/v1/observations/{i}", headers=headers).status_code != 200
        ]
        assert load.acknowledged
        assert missing == [], f"{len(missing)} acknowledged writes are gone"
        twice = _captured_more_than_once(own_runtime, admin.tenant_id)
        assert twice == [], f"{len(twice)} notes were recorded more than once"


def _captured_more_than_once(runtime: Runtime, tenant_id: object) -> list[str]:
    """The digests of contents captured as more than one observation: every note the
    writers send is different, so a digest twice is a write recorded twice."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT state FROM "{runtime.database.schema}".{EVENTS_TABLE}'
            " WHERE tenant_id = %s AND topic = 'palimpsest:ObservationCaptured'",
            (tenant_id,),
        ).fetchall()
    captured = Counter(json.loads(bytes(state))["digest"] for (state,) in rows)
    assert captured, "no observation in the log"
    return [digest for digest, times in captured.items() if times > 1]
