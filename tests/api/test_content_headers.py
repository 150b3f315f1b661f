"""Stored content never runs in a browser that reaches the API (issue 17, item 5)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI, Response
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.conftest import Tenant

ACTIVE = [
    ("text/html", "<script>alert(document.cookie)</script>"),
    ("image/svg+xml", '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
]


@pytest.mark.parametrize(("media_type", "content"), ACTIVE)
def test_active_content_is_served_as_a_sandboxed_attachment(
    client: TestClient, tenant: Tenant, media_type: str, content: str
) -> None:
    headers = tenant.headers()
    created = post(
        client, "/v1/observations", {"content": content, "media_type": media_type}, headers
    )
    assert created.status_code == 201, created.text
    served = client.get(f"/v1/observations/{created.json()['id']}/content", headers=headers)
    assert served.status_code == 200
    assert served.text == content  # the bytes are the caller's, unchanged
    assert served.headers["content-type"].startswith(media_type)
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-disposition"].startswith("attachment")
    policy = served.headers["content-security-policy"]
    assert "sandbox" in policy
    assert "default-src 'none'" in policy


def test_plain_text_is_inline_but_still_sandboxed(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    created = post(client, "/v1/observations", {"content": "just words"}, headers)
    served = client.get(f"/v1/observations/{created.json()['id']}/content", headers=headers)
    assert served.status_code == 200
    assert "content-disposition" not in served.headers
    assert "sandbox" in served.headers["content-security-policy"]
    assert served.headers["x-content-type-options"] == "nosniff"


def test_every_answer_says_nosniff_errors_included(client: TestClient, tenant: Tenant) -> None:
    answers = [
        client.get("/healthz"),
        client.get("/v1/memories", headers=tenant.headers()),
        client.get("/v1/memories"),  # 401 problem
        client.get("/v1/no-such-route"),  # 404 problem
    ]
    assert [a.status_code for a in answers] == [200, 200, 401, 404]
    assert problem_slug(answers[2]) == "unauthenticated"
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff", answer.request.url


_TWICE = b'{"content": "a", "content": "b"}'


def _small_app(runtime: Runtime) -> FastAPI:
    app = create_app(ApiSettings(max_request_bytes=1024), runtime)

    def own_header() -> Response:  # a route that sets the header its own way
        return Response("x", headers={"X-Content-Type-Options": "sniff-away"})

    app.add_api_route("/own-header", own_header)
    return app


def test_streams_metrics_and_refused_bodies_say_nosniff_once(
    runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers()
    json_headers = {**headers, "Content-Type": "application/json"}

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"content": "'
        yield b"x" * 2048
        yield b'"}'

    with TestClient(_small_app(runtime)) as client:
        start = client.get("/v1/events", headers=headers, params={"limit": 1000}).json()
        remember(client, headers)
        with client.stream(
            "GET",
            "/v1/events/stream",
            headers=headers,
            params={"after": start["next_after"], "limit": 1},
        ) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            "".join(stream.iter_text())
        answers = {
            "stream": stream,
            "metrics": client.get("/metrics"),
            "declared 413": client.post(
                "/v1/observations", content=b"x" * 2048, headers=json_headers
            ),
            "chunked 413": client.post("/v1/observations", content=chunked(), headers=json_headers),
            "duplicate key": client.post("/v1/observations", content=_TWICE, headers=json_headers),
            "validation": client.post("/v1/observations", json={"content": ""}, headers=headers),
            "route's own": client.get("/own-header"),
        }
    assert {name: a.status_code for name, a in answers.items()} == {
        "stream": 200,
        "metrics": 200,
        "declared 413": 413,
        "chunked 413": 413,
        "duplicate key": 400,
        "validation": 422,
        "route's own": 200,
    }
    assert problem_slug(answers["declared 413"]) == "content-too-large"
    assert problem_slug(answers["chunked 413"]) == "content-too-large"
    assert problem_slug(answers["duplicate key"]) == "duplicate-key"
    for name, answer in answers.items():
        assert answer.headers.get_list("x-content-type-options") == ["nosniff"], name
