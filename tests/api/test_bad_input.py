"""Every malformed or hostile request gets a precise problem and writes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.limits import MAX_OBSERVATION_BYTES, MAX_VERSION_BYTES
from tests.api.helpers import observe, problem_slug, remember
from tests.conftest import Tenant

MEMORY = {"type": "fact", "scope": "user", "content": "Lives in Lyon"}

# (name, path, body, expected status, expected problem slug)
CASES: list[tuple[str, str, Any, int, str]] = [
    ("unknown memory type", "/v1/memories", {**MEMORY, "type": "opinion"}, 422, "validation-error"),
    ("wrong type for content", "/v1/memories", {**MEMORY, "content": 42}, 422, "validation-error"),
    ("missing scope", "/v1/memories", {"type": "fact", "content": "x"}, 422, "validation-error"),
    ("unknown field", "/v1/memories", {**MEMORY, "colour": "red"}, 422, "validation-error"),
    # The schema states these rules now, so the request model refuses them.
    ("empty content", "/v1/memories", {**MEMORY, "content": ""}, 422, "validation-error"),
    ("blank content", "/v1/memories", {**MEMORY, "content": "  \n "}, 422, "validation-error"),
    (
        "oversize version",
        "/v1/memories",
        {**MEMORY, "content": "x" * (MAX_VERSION_BYTES + 1)},
        413,
        "content-too-large",
    ),
    (
        "control char in scope",
        "/v1/memories",
        {**MEMORY, "scope": "a\x00b"},
        422,
        "validation-error",
    ),
    ("trust above one", "/v1/memories", {**MEMORY, "trust": 1.5}, 422, "validation-error"),
    (
        "unknown observation",
        "/v1/memories",
        {**MEMORY, "evidence": [{"observation_id": str(uuid.uuid4()), "start": 0, "end": 1}]},
        404,
        "not-found",
    ),
    (
        "reference outside a batch",
        "/v1/memories",
        {**MEMORY, "evidence": [{"observation_id": "$0", "start": 0, "end": 1}]},
        404,  # names no item: what an id of nothing answers (the schema cannot say more)
        "not-found",
    ),
    ("empty observation", "/v1/observations", {"content": ""}, 422, "validation-error"),
    (
        "oversize observation",
        "/v1/observations",
        {"content": "x" * (MAX_OBSERVATION_BYTES + 1)},
        413,
        "content-too-large",
    ),
    (
        "naive captured_at",
        "/v1/observations",
        {"content": "x", "captured_at": "2026-01-01T00:00:00"},
        422,
        "validation-error",
    ),
    (
        "future captured_at",
        "/v1/observations",
        {"content": "x", "captured_at": "2999-01-01T00:00:00Z"},
        422,
        "invalid-input",
    ),
    (
        "bad media type",
        "/v1/observations",
        {"content": "x", "media_type": "not a type"},
        422,
        "validation-error",
    ),
    (
        "version of unknown memory",
        f"/v1/memories/{uuid.uuid4()}/versions",
        {"content": "x"},
        404,
        "not-found",
    ),
    (
        "version path id not a uuid",
        "/v1/memories/123/versions",
        {"content": "x"},
        422,
        "validation-error",
    ),
    (
        "edge of unknown kind",
        f"/v1/memories/{uuid.uuid4()}/edges",
        {"kind": "likes", "target_id": str(uuid.uuid4())},
        422,
        "validation-error",
    ),
    ("empty batch", "/v1/batch", {"items": []}, 422, "validation-error"),
    ("batch item without op", "/v1/batch", {"items": [{"content": "x"}]}, 422, "validation-error"),
    (
        "batch reference forward",
        "/v1/batch",
        {
            "items": [
                {"op": "add_version", "memory_id": "$1", "content": "x"},
                {"op": "create_memory", **MEMORY},
            ]
        },
        404,
        "not-found",
    ),
    ("body is a list", "/v1/memories", [MEMORY], 422, "validation-error"),
]


@pytest.mark.parametrize(
    ("name", "path", "body", "status", "slug"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_request_is_refused_precisely_and_writes_nothing(
    client: TestClient,
    tenant: Tenant,
    snapshot: Any,
    name: str,
    path: str,
    body: Any,
    status: int,
    slug: str,
) -> None:
    headers = tenant.headers("writer")
    before = snapshot()
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == status, response.text
    assert problem_slug(response) == slug
    assert response.json()["detail"]
    assert snapshot() == before


def test_evidence_outside_the_observation_is_refused(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    obs_id = observe(client, headers, "short")
    before = snapshot()
    for start, end in [(0, 6), (3, 3), (4, 2), (-1, 2)]:
        response = client.post(
            "/v1/memories",
            headers=headers,
            json={**MEMORY, "evidence": [{"observation_id": obs_id, "start": start, "end": end}]},
        )
        assert response.status_code == 422, (start, end)
        assert problem_slug(response) in {"evidence-out-of-range", "validation-error"}
    assert snapshot() == before


def test_observation_offsets_count_code_points_not_bytes(
    client: TestClient, tenant: Tenant
) -> None:
    headers = tenant.headers()
    obs_id = observe(client, headers, "café ☕")  # 6 code points, 10 bytes
    ok = client.post(
        "/v1/memories",
        headers=headers,
        json={**MEMORY, "evidence": [{"observation_id": obs_id, "start": 5, "end": 6}]},
    )
    assert ok.status_code == 201
    too_far = client.post(
        "/v1/memories",
        headers=headers,
        json={**MEMORY, "evidence": [{"observation_id": obs_id, "start": 5, "end": 7}]},
    )
    assert too_far.status_code == 422


def test_a_lone_surrogate_escape_is_refused(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    # Valid JSON ("\\ud800" is a legal escape) that decodes to text with no UTF-8 form.
    headers = {**tenant.headers(), "Content-Type": "application/json"}
    before = snapshot()
    response = client.post(
        "/v1/memories",
        headers=headers,
        content=b'{"type":"fact","scope":"u","content":"a\\ud800b"}',
    )
    assert response.status_code == 422
    assert problem_slug(response) == "validation-error"  # the content's pattern refuses it
    assert snapshot() == before


@pytest.mark.parametrize(
    "raw",
    [b'{"type": "fact", ', b'{"type":"fact","scope":"u","content":"\xff\xfe"}', b"not json at all"],
)
def test_malformed_json_and_invalid_utf8_are_400(
    client: TestClient, tenant: Tenant, snapshot: Any, raw: bytes
) -> None:
    before = snapshot()
    response = client.post(
        "/v1/memories",
        content=raw,
        headers={**tenant.headers(), "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert problem_slug(response) == "malformed-json"
    assert snapshot() == before


@pytest.mark.parametrize("key", [b"", b"x" * 256, b"has space", b"tab\tkey", "ünïcode".encode()])
def test_malformed_idempotency_keys_are_refused(
    client: TestClient, tenant: Tenant, key: bytes
) -> None:
    headers = [(k.encode(), v.encode()) for k, v in tenant.headers().items()]
    headers.append((b"Idempotency-Key", key))
    response = client.post("/v1/memories", json=MEMORY, headers=headers)
    assert response.status_code == 422
    assert problem_slug(response) == "invalid-input"


def test_request_bodies_over_the_limit_are_refused_before_parsing(
    client: TestClient, tenant: Tenant
) -> None:
    huge = (
        b'{"items": ['
        + b'{"op":"create_observation","content":"'
        + b"x" * (17 * 1024 * 1024)
        + b'"}]}'
    )
    response = client.post(
        "/v1/batch", content=huge, headers={**tenant.headers(), "Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert problem_slug(response) == "content-too-large"


def test_unknown_ids_on_reads_are_404(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    for path in [
        f"/v1/memories/{uuid.uuid4()}/versions",
        f"/v1/observations/{uuid.uuid4()}",
        f"/v1/observations/{uuid.uuid4()}/content",
        f"/v1/observations/{memory['id']}",
    ]:  # a memory id is not an observation
        response = client.get(path, headers=headers)
        assert response.status_code == 404, path
        assert problem_slug(response) == "not-found"
