"""The decay cycle with the model importance scorer configured
(``PALIMPSEST_IMPORTANCE=openai``): SmolLM2's recorded ratings
(``tests/benchmarks/record_importance.py``) replayed over loopback become the
importance factor of a dry run's scores; with the model down, the heuristic's do."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.importance import HeuristicImportance
from palimpsest.projections.judgment._recorded import RecordingServer, load_recordings
from palimpsest.projections.judgment.importance import (
    OpenAICompatibleImportance,
    configured_importance,
)
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.benchmarks.record_importance import MEMORIES, MODEL, RECORDINGS
from tests.conftest import Tenant
from tests.projections.drains.test_decay_cycle import NOW, cycle, set_policy
from tests.projections.judgment.test_importance import recorded_importance


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingServer]:
    """The recordings served on loopback, and the service configured to ask them."""
    with RecordingServer(load_recordings(RECORDINGS)) as running:
        monkeypatch.setenv("PALIMPSEST_IMPORTANCE", "openai")
        monkeypatch.setenv("PALIMPSEST_IMPORTANCE_URL", running.url)
        monkeypatch.setenv("PALIMPSEST_IMPORTANCE_MODEL", MODEL)
        monkeypatch.setenv("PALIMPSEST_IMPORTANCE_RETRIES", "0")
        yield running


def _write_memories(client: TestClient, tenant: Tenant) -> dict[str, int]:
    """Write :data:`MEMORIES` (no evidence: graded ``unsupported``, as recorded); return
    each memory id's index in :data:`MEMORIES`."""
    headers = tenant.headers("writer")
    return {
        remember(client, headers, type=m.memory_type, content=m.text)["id"]: n
        for n, m in enumerate(MEMORIES)
    }


def test_a_cycle_with_the_model_configured_scores_importance_by_the_model(
    client: TestClient, runtime: Runtime, tenant: Tenant, server: RecordingServer
) -> None:
    written = _write_memories(client, tenant)

    report = cycle(client, runtime, tenant, NOW, dry_run=True)

    scores = {s["memory_id"]: s["factors"]["importance"] for s in report.scores or []}
    assert set(scores) == set(written)
    for memory_id, n in written.items():
        assert scores[memory_id] == pytest.approx(recorded_importance(MEMORIES[n]))
        assert scores[memory_id] != pytest.approx(
            HeuristicImportance().importance(MEMORIES[n]), abs=1e-3
        )
    assert len(server.served) == len(MEMORIES)
    scorer = configured_importance()
    assert isinstance(scorer, OpenAICompatibleImportance) and scorer.fallbacks == 0


def test_a_cycle_whose_model_is_down_scores_importance_by_the_heuristic(
    client: TestClient, runtime: Runtime, tenant: Tenant, server: RecordingServer
) -> None:
    written = _write_memories(client, tenant)
    server.close()  # the model server goes away

    report = cycle(client, runtime, tenant, NOW, dry_run=True)

    scores = {s["memory_id"]: s["factors"]["importance"] for s in report.scores or []}
    for memory_id, n in written.items():
        assert scores[memory_id] == pytest.approx(
            HeuristicImportance().importance(MEMORIES[n]), abs=1e-6
        )
    scorer = configured_importance()
    assert isinstance(scorer, OpenAICompatibleImportance)
    assert scorer.fallbacks == len(MEMORIES) and scorer.asked == 1


class _Failing:
    """An outage on loopback: an endpoint that answers every request with HTTP 500."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"error": {"message": "the model crashed"}}'
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.mark.parametrize("model", ["answers", "port closed", "answers 500"])
def test_a_cycle_whose_model_failed_says_so_and_archives_nothing_itself(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    server: RecordingServer,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
) -> None:
    # Given memories the cycle prunes whatever their importance, with auto-archive on
    written = _write_memories(client, tenant)
    set_policy(client, tenant, prune_below=0.99, fade_below=0.99, auto_archive_decayed=True)
    failing = _Failing() if model == "answers 500" else None
    if failing is not None:
        monkeypatch.setenv("PALIMPSEST_IMPORTANCE_URL", failing.url)
    elif model == "port closed":
        server.close()
    try:
        # When the cycle runs, with the model answering, gone, or failing
        report = cycle(client, runtime, tenant, NOW)
    finally:
        if failing is not None:
            failing.close()

    # Then the report says how many scores fell back to the heuristic, and a cycle with
    # any archives nothing itself: what it prunes waits for a person
    assert report.counts["prune"] == len(MEMORIES)
    if model == "answers":
        assert len(report.archived) == 3 and len(report.proposals) == 1  # the event
        assert report.importance_fallbacks == 0
        return
    assert report.archived == [] and len(report.proposals) == len(MEMORIES)
    assert report.importance_fallbacks == len(MEMORIES)
    listed = client.get("/v1/proposals?action=decay", headers=tenant.headers()).json()["items"]
    assert {i["memory"]["id"] for i in listed} == set(written)
