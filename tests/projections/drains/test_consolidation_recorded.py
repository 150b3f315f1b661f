"""Consolidation with a model: the summariser's real requests, answered from responses
recorded from SmolLM2-135M-Instruct on ``llama_cpp.server``
(``tests/benchmarks/record_summariser.py``), replayed over a loopback server.

The recordings are what the model said, not what a good merge would be: the tests
check that palimpsest stores and serves the model's text as it came (the merge's
proposed text, a reflection kept apart), never that the text is right.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._consolidation import consolidate_survivors
from palimpsest.projections.judgment._recorded import RecordingServer, load_recordings
from palimpsest.projections.judgment.summariser import OpenAICompatibleSummariser, insights_of
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, remember
from tests.benchmarks.record_summariser import MERGE_TEXTS, MODEL, RECORDINGS, REFLECT_TEXTS
from tests.conftest import Tenant, index_until_caught_up
from tests.projections.drains.test_consolidation import NOW, Knobs


def _answer(prefix: str) -> str:
    """The model's recorded text for the request recorded under ``prefix``."""
    [path] = RECORDINGS.glob(f"{prefix}-*.json")
    body = json.loads(path.read_text(encoding="utf-8"))["response"]["body"]
    return str(body["choices"][0]["message"]["content"]).strip()


@pytest.fixture
def recorded() -> Iterator[tuple[RecordingServer, OpenAICompatibleSummariser]]:
    with RecordingServer(load_recordings(RECORDINGS)) as server:
        yield server, OpenAICompatibleSummariser(server.url, MODEL, timeout_s=30, retries=0)


def _remember(
    client: TestClient, tenant: Tenant, texts: tuple[str, ...], **fields: Any
) -> list[str]:
    ids = []
    for text in texts:
        obs = observe(client, tenant.headers(), f"said: {text}")
        evidence = [{"observation_id": obs, "start": 6, "end": 6 + len(text)}]
        ids.append(
            str(remember(client, tenant.headers(), content=text, evidence=evidence, **fields)["id"])
        )
    return ids


def _run(
    runtime: Runtime, tenant: Tenant, ids: list[str], summariser: Any, **knobs: Any
) -> dict[str, Any]:
    index_until_caught_up(runtime, tenant.id)
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return consolidate_survivors(
        runtime.log,
        Writer(runtime.log, policy, clock=lambda: NOW),
        tenant.id,
        snapshot=NOW,
        policy=Knobs(**knobs),
        survivors=sorted((UUID(i) for i in ids), key=str),
        cycle_id=uuid4(),
        dry_run=False,
        model_id=runtime.embedder.model_id,
        summariser=summariser,
    )


def test_a_model_merge_is_proposed_with_the_models_text_never_applied_directly(
    client: TestClient, tenant: Tenant, runtime: Runtime, recorded: Any
) -> None:
    server, summariser = recorded
    # The newest member is the centre, sent first: create them in reverse.
    ids = _remember(client, tenant, tuple(reversed(MERGE_TEXTS)), type="decision", project="rec")
    report = _run(
        runtime,
        tenant,
        ids,
        summariser,
        merge_similarity_floor=0.3,
        auto_apply_extractive_merges=True,
    )
    assert report["failures"] == [] and report["summariser"] == MODEL
    assert report["proposed"] == 1 and report["merged"] == 0, (
        "only extractive merges apply directly"
    )
    assert len(server.served) == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=tenant.headers()).json()["items"]
    assert proposal["model"] == MODEL
    assert proposal["merged_content"] == _answer("merge")
    assert sorted(s["id"] for s in proposal["sources"]) == sorted(ids)


def test_a_model_reflection_is_kept_apart(
    client: TestClient, tenant: Tenant, runtime: Runtime, recorded: Any
) -> None:
    server, summariser = recorded
    ids = _remember(client, tenant, REFLECT_TEXTS, type="note", project="rec-reflect")
    report = _run(
        runtime, tenant, ids, summariser, merge_similarity_floor=0.999, reflections_enabled=True
    )
    assert report["failures"] == [] and report["groups"] == 0
    assert len(server.served) == 1, "one request for the project's group"
    insights = insights_of(_answer("reflect"), REFLECT_TEXTS)
    assert insights, "the recording holds lines to keep (a model's, however poor)"
    assert report["reflections"] == len(insights)
    listed = client.get(
        "/v1/memories",
        params={"project": "rec-reflect", "include_reflections": "true"},
        headers=tenant.headers(),
    ).json()
    assert sorted(i["id"] for i in listed["items"]) == sorted(ids)
    assert [r["content"] for r in listed["reflections"]] == list(reversed(insights))
