"""Every request is counted and logged with bounded labels, and oversized bodies are
413 however they arrive (issue 17, items 4 and 8)."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import problem_slug
from tests.conftest import Tenant


def _boom() -> None:
    raise RuntimeError("a bug")


@pytest.fixture
def app_client(runtime: Runtime) -> Iterator[TestClient]:
    app = create_app(ApiSettings(), runtime)
    app.add_api_route("/boom", _boom)  # stands for any bug in a route
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_random_methods_do_not_grow_metrics(app_client: TestClient) -> None:
    rng = random.Random(17)
    before = len(app_client.get("/metrics").text)
    methods = {"".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=12)) for _ in range(300)}
    for method in methods:
        app_client.request(method, f"/v1/{method.lower()}")
    text = app_client.get("/metrics").text
    assert not any(m in text for m in methods), "a client's method became a label value"
    assert 'method="other"' in text
    # One more series per (other, route, status), not one per request.
    assert len(text) - before < 5_000, f"/metrics grew by {len(text) - before} bytes"


def test_an_unhandled_error_is_counted_logged_and_sniff_proof(
    app_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="palimpsest.http"):
        answer = app_client.get("/boom")
    assert answer.status_code == 500
    assert problem_slug(answer) == "internal-error"
    assert answer.headers["x-content-type-options"] == "nosniff"
    text = app_client.get("/metrics").text
    assert 'palimpsest_http_requests_total{method="GET",route="/boom",status="500"} 1.0' in text
    logged = [
        r
        for r in caplog.records
        if r.getMessage() == "http request" and getattr(r, "route", None) == "/boom"
    ]
    assert [getattr(r, "status", None) for r in logged] == [500]


def test_a_chunked_body_over_the_limit_is_413(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    limit = ApiSettings().max_request_bytes
    chunk = b"x" * (1 << 20)

    def body() -> Iterator[bytes]:  # no Content-Length: sent chunked
        yield b'{"content": "'
        for _ in range(limit // len(chunk) + 4):
            yield chunk
        yield b'"}'

    answer = client.post(
        "/v1/observations",
        content=body(),
        headers={**tenant.headers(), "Content-Type": "application/json"},
    )
    assert answer.status_code == 413, answer.text[:200]
    assert problem_slug(answer) == "content-too-large"
