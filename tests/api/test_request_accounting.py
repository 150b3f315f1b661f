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


def _count(text: str, method: str, route: str, status: int) -> float:
    labels = f'method="{method}",route="{route}",status="{status}"'
    prefix = f"palimpsest_http_requests_total{{{labels}}} "
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def test_refused_bodies_are_counted_timed_and_logged_as_answered(
    runtime: Runtime, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {**tenant.headers(), "Content-Type": "application/json"}
    text_headers = {**tenant.headers(), "Content-Type": "text/plain"}

    def chunked(size: int) -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"content": "'
        yield b"x" * size
        yield b'"}'

    with TestClient(create_app(ApiSettings(max_request_bytes=1024), runtime)) as client:
        with caplog.at_level("INFO", logger="palimpsest.http"):
            answers = [
                # Declared too large: refused before anything reads it.
                client.post("/v1/observations", content=b"x" * 2048, headers=headers),
                # Too large as it arrives, read by the strict JSON check...
                client.post("/v1/observations", content=chunked(2048), headers=headers),
                # ...or by the route (not JSON): its own answer (400) gives way to the 413.
                client.post("/v1/observations", content=chunked(2048), headers=text_headers),
                # Refused by the strict JSON check, before any route.
                client.post("/v1/observations", content=b'{"a": 1, "a": 2}', headers=headers),
                client.get("/healthz"),
            ]
            # The lines of these requests only: whether the /metrics request below is
            # logged too depends on the level an earlier test left the logger at.
            records = list(caplog.records)
        text = client.get("/metrics").text
    assert [a.status_code for a in answers] == [413, 413, 413, 400, 200]
    assert [problem_slug(a) for a in answers[:4]] == ["content-too-large"] * 3 + ["duplicate-key"]
    assert _count(text, "POST", "unmatched", 413) == 2
    assert _count(text, "POST", "/v1/observations", 413) == 1
    assert _count(text, "POST", "unmatched", 400) == 1
    assert _count(text, "GET", "/healthz", 200) == 1
    latency = "palimpsest_http_request_duration_seconds_count"
    assert f'{latency}{{method="POST",route="unmatched"}} 3.0' in text
    assert f'{latency}{{method="POST",route="/v1/observations"}} 1.0' in text
    assert f'{latency}{{method="GET",route="/healthz"}} 1.0' in text
    logged = [
        (getattr(r, "route", None), getattr(r, "status", None))
        for r in records
        if r.getMessage() == "http request"
    ]
    assert logged == [
        ("unmatched", 413),
        ("unmatched", 413),
        ("/v1/observations", 413),
        ("unmatched", 400),
        ("/healthz", 200),
    ]
