"""A write's contradiction candidates never hold it up: ``pending`` at once unless
they are ready within a few milliseconds; ``?candidates=wait`` waits, bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.domain.candidate_budget import MISSES_TO_STOP, PROBE_EVERY
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug
from tests.conftest import Tenant, index_until_caught_up


def _write(
    client: TestClient, headers: dict[str, str], query: str, content: str
) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    response = post(
        client,
        f"/v1/memories{query}",
        {"type": "fact", "scope": "user", "content": content},
        headers,
    )
    assert response.status_code == 201, response.text
    return response.json(), time.perf_counter() - started


def test_a_write_answers_pending_at_once_and_wait_waits_for_the_candidates(
    runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    # Given a server that believes a drain runs, and nothing indexing yet.
    headers = tenant.headers()
    wait_s = runtime.embedding.candidate_wait_s
    with TestClient(create_app(ApiSettings(), runtime, wake=lambda: None)) as client:
        _write(client, headers, "", "The office cat is called Miso")
        index_until_caught_up(runtime, tenant.id)

        # By default the write answers at once, pending, with where to look later.
        written, elapsed = _write(client, headers, "", "The office cat is called Tofu")
        assert written["potential_contradictions"]["status"] == "pending"
        assert written["potential_contradictions"]["url"] == (
            f"/v1/memories/{written['id']}/candidates"
        )
        assert elapsed < wait_s / 2, elapsed
        # Embedded now, so the next version can pair with it: the indexing drain
        # writes a pass's vectors on two connections, so a peer embedded in the
        # same pass may commit after the waiting version's own (its candidates are
        # those indexed when its embedding lands).
        index_until_caught_up(runtime, tenant.id)

        # ?candidates=wait waits until the version is embedded (here 0.3 s later).
        later = threading.Timer(0.3, index_until_caught_up, (runtime, tenant.id))
        later.start()
        waited, elapsed = _write(client, headers, "?candidates=wait", "Our cat is named Tofu")
        later.join()
        found = waited["potential_contradictions"]
        assert found["status"] == "ready", found
        assert {item["memory_id"] for item in found["items"]} >= {written["id"]}
        assert 0.25 < elapsed < wait_s + 2, elapsed

        # ... and no longer than PALIMPSEST_CANDIDATE_WAIT_S when nothing embeds it.
        stuck, elapsed = _write(client, headers, "?candidates=wait", "The cat is called Udon")
        assert stuck["potential_contradictions"]["status"] == "pending"
        assert wait_s * 0.9 <= elapsed < wait_s + 2, elapsed

        # Any other value is refused, and writes nothing.
        before = snapshot()
        refused = post(
            client,
            "/v1/memories?candidates=forever",
            {"type": "fact", "scope": "user", "content": "never written"},
            headers,
        )
        assert refused.status_code == 422 and problem_slug(refused) == "validation-error"
        assert snapshot() == before


def test_a_version_of_a_memory_never_paired_does_not_wait_for_its_embedding(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a note, projected, and nothing embedding its next version.
    headers = tenant.headers()
    wait_s = runtime.embedding.candidate_wait_s
    with TestClient(create_app(ApiSettings(), runtime, wake=lambda: None)) as client:
        note = post(
            client, "/v1/memories", {"type": "note", "scope": "user", "content": "Lunch"}, headers
        )
        assert note.status_code == 201, note.text
        index_until_caught_up(runtime, tenant.id)

        # Even asked to wait, its version answers at once: notes are never paired.
        started = time.perf_counter()
        version = post(
            client,
            f"/v1/memories/{note.json()['id']}/versions?candidates=wait",
            {"content": "Lunch at noon"},
            headers,
        )
        elapsed = time.perf_counter() - started
    assert version.status_code == 201, version.text
    found = version.json()["potential_contradictions"]
    assert found["status"] == "ready" and found["items"] == [], found
    assert elapsed < wait_s / 2, elapsed


@pytest.mark.slow
def test_writes_stop_spending_the_budget_while_it_never_pays_and_probe_it(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a server that believes a drain runs, a budget of 300 ms, and nothing
    # embedding: every wait of the budget ends pending.
    headers = tenant.headers()
    budget_s = 0.3
    settings = ApiSettings(candidate_budget_ms=int(budget_s * 1000))
    with TestClient(create_app(settings, runtime, wake=lambda: None)) as client:
        # The first MISSES_TO_STOP writes wait the whole budget, in vain.
        for i in range(MISSES_TO_STOP):
            written, elapsed = _write(client, headers, "", f"The printer is on floor {i}")
            assert written["potential_contradictions"]["status"] == "pending"
            assert elapsed >= budget_s * 0.9, elapsed
        # Then writes answer at once, pending with the URL, but for one probe in PROBE_EVERY.
        took = []
        for i in range(PROBE_EVERY):
            written, elapsed = _write(client, headers, "", f"The printer moved to floor {i}")
            found = written["potential_contradictions"]
            assert found["status"] == "pending"
            assert found["url"] == f"/v1/memories/{written['id']}/candidates"
            took.append(elapsed >= budget_s * 0.9)
        assert took == [False] * (PROBE_EVERY - 1) + [True], took

        # A probe that lands on a version of a note (never paired: ready without a
        # wait) says nothing of the embedder: the budget stays stopped.
        note = post(
            client, "/v1/memories", {"type": "note", "scope": "user", "content": "Toner"}, headers
        )
        assert note.status_code == 201, note.text
        for i in range(PROBE_EVERY):
            version = post(
                client,
                f"/v1/memories/{note.json()['id']}/versions",
                {"content": f"Toner order {i}"},
                headers,
            )
            assert version.status_code == 201, version.text
            assert version.json()["potential_contradictions"]["status"] == "ready"
        _, elapsed = _write(client, headers, "", "The printer is on floor 9")
        assert elapsed < budget_s / 2, elapsed

        # A probe that finds its candidates ready brings the budget back: embedded
        # within the budget, the write answers ready, and the next one waits again.
        for _ in range(PROBE_EVERY - 2):
            _write(client, headers, "", "The printer is out of toner")
        index_until_caught_up(runtime, tenant.id)
        later = threading.Timer(0.05, index_until_caught_up, (runtime, tenant.id))
        later.start()
        probe, _ = _write(client, headers, "", "Our printer is on the third floor")
        later.join()
        assert probe["potential_contradictions"]["status"] == "ready", probe
        _, elapsed = _write(client, headers, "", "The printer is on the fourth floor")
        assert elapsed >= budget_s * 0.9, elapsed
