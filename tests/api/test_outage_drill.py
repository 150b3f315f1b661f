"""The outage drill: a write is recorded once, or not at all, whatever happens to the
database or to the server.

A real ``palimpsest serve`` on the test's own PostgreSQL takes notes from four
writers over HTTP. PostgreSQL is stopped for ten seconds and started again; then
the server is killed with SIGKILL in the middle of the writes and started again.
Afterwards every write that was acknowledged (201) is readable, exactly once, as
it was answered; a write that was not acknowledged (a 503, a connection cut by
the kill) is in the log once or not at all.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

from palimpsest.domain.digest import content_digest
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.cli.serving import start_serve, until
from tests.embedded_server import own_server, start, stop

pytestmark = pytest.mark.slow

WRITERS = 4
OUTAGE_S = 10.0
SERVE_SETTINGS = {"PALIMPSEST_DB_WAIT_S": "2"}


@pytest.fixture
def own_runtime(tmp_path: Path) -> Iterator[Runtime]:
    with own_server(tmp_path, db_wait_s=2) as runtime:
        yield runtime


@dataclass
class Writers:
    """Writers on real threads posting notes to whichever server is up now."""

    base: str
    headers: dict[str, str]
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each acknowledged note's content, with the answer's body."""
    statuses: Counter[int | str] = field(default_factory=Counter)
    """How many answers of each status (``"cut"``: no answer at all)."""

    def run(self, writer: int) -> None:
        with httpx2.Client(timeout=60) as http:
            n = 0
            while not self.stop.is_set():
                n += 1
                content = f"drill writer {writer} note {n}"
                with self.lock:
                    url = f"{self.base}/v1/memories"
                body = {"type": "note", "scope": "drill", "content": content}
                try:
                    response = http.post(url, json=body, headers=self.headers)
                except httpx2.TransportError:
                    self._count("cut")
                    time.sleep(0.1)
                    continue
                self._count(response.status_code)
                if response.status_code == 201:
                    with self.lock:
                        self.acknowledged[content] = response.json()
                    time.sleep(0.02)  # a steady load, not a benchmark
                else:
                    time.sleep(0.1)

    def _count(self, status: int | str) -> None:
        with self.lock:
            self.statuses[status] += 1

    def count(self, status: int | str) -> int:
        with self.lock:
            return self.statuses[status]


def _kill(server: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``serve`` and whatever it started (its session)."""
    os.killpg(server.pid, signal.SIGKILL)
    server.wait(30)


def test_the_outage_drill_leaves_every_acknowledged_write_once(own_runtime: Runtime) -> None:
    admin = create_tenant(own_runtime.log, "drill")
    headers = {"Authorization": f"Bearer {admin.token}"}
    server, base = start_serve(own_runtime, settings=SERVE_SETTINGS)
    writers = Writers(base, headers)
    threads = [threading.Thread(target=writers.run, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    try:
        until(lambda: writers.count(201) >= 20, 60, "the writers are acknowledged")
        stop(own_runtime)
        time.sleep(OUTAGE_S)
        start(own_runtime)
        before = writers.count(201)
        until(lambda: writers.count(201) > before + 20, 90, "writes recover after the outage")
        _kill(server)  # mid-write: four writers are never idle
        server, base = start_serve(own_runtime, settings=SERVE_SETTINGS)
        with writers.lock:
            writers.base = base
        before = writers.count(201)
        until(lambda: writers.count(201) > before + 20, 90, "writes go on after the restart")
        writers.stop.set()
        for thread in threads:
            thread.join(90)
        # Read back through the restarted server, as a client would.
        with httpx2.Client(base_url=base, headers=headers, timeout=30) as http:
            unreadable = [
                content
                for content, body in writers.acknowledged.items()
                if _texts(http, body["id"]) != [content]
            ]
    finally:
        writers.stop.set()
        for thread in threads:
            thread.join(90)
        if server.poll() is None:
            _kill(server)

    assert writers.count(503), "no write met the outage: the drill did not drill"
    failures = {s: n for s, n in writers.statuses.items() if isinstance(s, int) and s >= 500}
    assert set(failures) <= {503}, writers.statuses
    assert unreadable == [], f"{len(unreadable)} acknowledged writes do not read back"
    # The log, as the owner sees it: how many times each note's text was recorded.
    recorded = _versions_by_digest(own_runtime, admin.tenant_id)
    assert [d for d, n in recorded.items() if n > 1] == [], "a write was recorded twice"
    acknowledged = writers.acknowledged
    lost = [c for c in acknowledged if recorded[content_digest(c.encode())] != 1]
    assert lost == [], f"{len(lost)} acknowledged writes are not in the log once"
    positions = _last_positions(own_runtime, admin.tenant_id)
    wrong = [c for c, body in acknowledged.items() if positions.get(body["id"]) != body["position"]]
    assert wrong == [], f"{len(wrong)} answers do not say where their write is"


def _texts(http: httpx2.Client, memory_id: str) -> list[str]:
    """The texts of a memory's versions, oldest first (none if it cannot be read)."""
    response = http.get(f"/v1/memories/{memory_id}/versions")
    if response.status_code != 200:
        return []
    return [version["content"] for version in response.json()["versions"]]


def _versions_by_digest(runtime: Runtime, tenant_id: object) -> Counter[str]:
    """How many versions of the tenant's memories record each text (by digest)."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT state FROM "{runtime.database.schema}".{EVENTS_TABLE}'
            " WHERE tenant_id = %s AND topic = 'palimpsest:VersionRecorded'",
            (tenant_id,),
        ).fetchall()
    return Counter(json.loads(bytes(state))["content_digest"] for (state,) in rows)


def _last_positions(runtime: Runtime, tenant_id: object) -> dict[str, int]:
    """The log position of each of the tenant's memories' last event, by id."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT originator_id, max(notification_id) FROM "{runtime.database.schema}".'
            f"{EVENTS_TABLE} WHERE tenant_id = %s AND topic LIKE 'palimpsest:%%'"
            " GROUP BY originator_id",
            (tenant_id,),
        ).fetchall()
    return {str(originator): int(position) for originator, position in rows}
