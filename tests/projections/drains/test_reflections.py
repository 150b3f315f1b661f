"""Reflections on real PostgreSQL: recorded apart from memories, absent from recall and
listings unless asked for, and redacted when a memory they were drawn from is erased.

The summariser here is a stand-in that returns a fixed sentence: it is not a model
and nothing here is a recording of one. It exercises what palimpsest does with a
reflection, not what a model would say.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from fastapi.testclient import TestClient

from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._consolidation import consolidate_survivors
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, index_until_caught_up
from tests.projections.drains.test_consolidation import Knobs

NOW = datetime(2026, 11, 30, 3, 0, tzinfo=UTC)
INSIGHT = "Raises security concerns after deployments"


class StandIn:
    """A fixed answer in place of a model (see the module)."""

    model = "stand-in-not-a-model"

    def summarise(self, texts: Sequence[str]) -> str:
        return texts[0]

    def reflect(self, texts: Sequence[str]) -> list[str]:
        return [INSIGHT]


def _memories(client: TestClient, tenant: Tenant, project: str) -> list[str]:
    said = [
        "After the deploy, Kim asked who audited the new endpoint.",
        "Kim wants a security review before every release.",
        "Kim flagged the open port after Tuesday's rollout.",
    ]
    ids = []
    for text in said:
        obs = observe(client, tenant.headers(), text)
        evidence = [{"observation_id": obs, "start": 0, "end": len(text)}]
        created = remember(
            client, tenant.headers(), type="note", project=project, content=text, evidence=evidence
        )
        ids.append(str(created["id"]))
    return ids


def _run(runtime: Runtime, tenant: Tenant, ids: list[str], **knobs: Any) -> dict[str, Any]:
    index_until_caught_up(runtime, tenant.id)
    summariser = knobs.pop("summariser", StandIn())
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return consolidate_survivors(
        runtime.log,
        Writer(runtime.log, policy, clock=lambda: NOW),
        tenant.id,
        snapshot=NOW,
        policy=Knobs(merge_similarity_floor=0.999, **knobs),
        survivors=sorted((UUID(i) for i in ids), key=str),
        cycle_id=uuid4(),
        dry_run=False,
        model_id=runtime.embedder.model_id,
        summariser=summariser,
    )


def _listing(client: TestClient, tenant: Tenant, **params: Any) -> dict[str, Any]:
    response = client.get("/v1/memories", params=params, headers=tenant.headers())
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _recall(client: TestClient, tenant: Tenant, **fields: Any) -> dict[str, Any]:
    body = {"query": "security after deploys", "k": 10, **fields}
    response = post(client, "/v1/recall", body, tenant.headers())
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_reflections_only_with_a_model_and_the_policy(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    ids = _memories(client, tenant, "p-off")
    assert _run(runtime, tenant, ids, summariser=None, reflections_enabled=True)["reflections"] == 0
    assert _run(runtime, tenant, ids, reflections_enabled=False)["reflections"] == 0
    assert (
        _listing(client, tenant, project="p-off", include_reflections="true")["reflections"] == []
    )


def test_reflections_are_absent_from_recall_and_listings_unless_asked(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    ids = _memories(client, tenant, "p-sec")
    report = _run(runtime, tenant, ids, reflections_enabled=True)
    assert report["reflections"] == 1 and report["groups"] == 0
    assert _run(runtime, tenant, ids, reflections_enabled=True)["reflections"] == 0, "once"

    plain = _listing(client, tenant, project="p-sec")
    assert plain["reflections"] is None
    assert sorted(i["id"] for i in plain["items"]) == sorted(ids)
    asked = _listing(client, tenant, project="p-sec", include_reflections="true")
    assert sorted(i["id"] for i in asked["items"]) == sorted(ids)
    [reflection] = asked["reflections"]
    assert reflection["content"] == INSIGHT
    assert sorted(reflection["source_ids"]) == sorted(ids)
    assert reflection["model"] == StandIn.model
    assert (
        _listing(client, tenant, project="elsewhere", include_reflections="true")["reflections"]
        == []
    )

    recalled = _recall(client, tenant, project="p-sec")
    assert recalled["reflections"] is None
    assert {i["id"] for i in recalled["items"]} <= set(ids)
    assert all(INSIGHT not in str(i) for i in recalled["items"])
    with_them = _recall(client, tenant, project="p-sec", include_reflections=True)
    assert [r["id"] for r in with_them["reflections"]] == [reflection["id"]]
    assert {i["id"] for i in with_them["items"]} == {i["id"] for i in recalled["items"]}


def test_erasing_a_source_redacts_the_reflection_and_its_text(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    ids = _memories(client, tenant, "p-erase")
    assert _run(runtime, tenant, ids, reflections_enabled=True)["reflections"] == 1
    [reflection] = _listing(client, tenant, project="p-erase", include_reflections="true")[
        "reflections"
    ]
    erased = post(
        client, "/v1/erasures", {"memory_ids": [ids[1]], "reason": "asked to"}, tenant.headers()
    )
    assert erased.status_code in (200, 201), erased.text
    assert (
        _listing(client, tenant, project="p-erase", include_reflections="true")["reflections"] == []
    )
    assert _recall(client, tenant, project="p-erase", include_reflections=True)["reflections"] == []
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT redacted_position, content_digest FROM "{schema}".reflections'
            " WHERE reflection_id = %s",
            (reflection["id"],),
        ).fetchone()
        assert row is not None and row[0] is not None
        left = conn.execute(
            f'SELECT count(*) FROM "{schema}".payloads WHERE tenant_id = %s AND digest = %s',
            (tenant.id, row[1]),
        ).fetchone()
    assert left is not None and left[0] == 0, "the reflection's text is gone"


def test_a_bad_include_reflections_is_refused_and_an_as_of_listing_has_none(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    before = snapshot()
    response = client.get(
        "/v1/memories", params={"include_reflections": "maybe"}, headers=tenant.headers()
    )
    assert response.status_code == 422
    assert problem_slug(response) in {"invalid-input", "validation-error", "invalid-request"}
    assert snapshot() == before
    as_of = client.get(
        "/v1/memories",
        params={"include_reflections": "true", "at_position": "1"},
        headers=tenant.headers(),
    )
    assert as_of.status_code == 200 and as_of.json()["reflections"] is None


def test_a_non_boolean_include_reflections_on_recall_is_refused(
    client: TestClient, tenant: Tenant
) -> None:
    response = post(
        client, "/v1/recall", {"query": "x", "include_reflections": "yes"}, tenant.headers()
    )
    assert response.status_code == 422
    assert problem_slug(response) in {"invalid-input", "validation-error", "invalid-request"}
