"""The decay cycle with the model importance scorer configured
(``PALIMPSEST_IMPORTANCE=openai``): SmolLM2's recorded ratings
(``tests/benchmarks/record_importance.py``) replayed over loopback become the
importance factor of a dry run's scores; with the model down, the heuristic's do."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.importance import HeuristicImportance
from palimpsest.projections.judgment.importance import (
    OpenAICompatibleImportance,
    configured_importance,
)
from palimpsest.projections.judgment.recorded import RecordingServer, load_recordings
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.benchmarks.record_importance import MEMORIES, MODEL, RECORDINGS
from tests.conftest import Tenant
from tests.projections.drains.test_decay_cycle import NOW, cycle
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
