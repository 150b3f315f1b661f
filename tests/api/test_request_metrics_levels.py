"""Every request is counted and timed whatever the log level; its log line is made only
when ``palimpsest.http`` logs at INFO (``serve`` at WARNING builds none of it)."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime
from tests.conftest import Tenant


def _sample(text: str, name: str, labels: str) -> float:
    prefix = f"{name}{{{labels}}} "
    lines = [line for line in text.splitlines() if line.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def test_requests_are_counted_at_any_level_and_logged_only_at_info(
    runtime: Runtime, tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    missing = f"/v1/memories/{uuid.uuid4()}"
    with TestClient(create_app(ApiSettings(), runtime)) as client:
        with caplog.at_level("WARNING", logger="palimpsest.http"):
            quiet = [client.get("/healthz"), client.get(missing, headers=tenant.headers())]
            quiet_lines = [r for r in caplog.records if r.getMessage() == "http request"]
        caplog.clear()
        with caplog.at_level("INFO", logger="palimpsest.http"):
            loud = [client.get("/healthz"), client.get(missing, headers=tenant.headers())]
            loud_lines = [r for r in caplog.records if r.getMessage() == "http request"]
        text = client.get("/metrics").text

    assert [a.status_code for a in quiet + loud] == [200, 404, 200, 404]
    assert quiet_lines == []
    assert [
        (r.method, r.path, r.route, r.status, r.tenant_id)  # type: ignore[attr-defined]
        for r in loud_lines
    ] == [
        ("GET", "/healthz", "/healthz", 200, None),
        ("GET", missing, "/v1/memories/{memory_id}", 404, str(tenant.id)),
    ]
    assert all(r.duration_ms >= 0 for r in loud_lines)  # type: ignore[attr-defined]
    requests = "palimpsest_http_requests_total"
    latency = "palimpsest_http_request_duration_seconds_count"
    assert _sample(text, requests, 'method="GET",route="/healthz",status="200"') == 2
    read = 'method="GET",route="/v1/memories/{memory_id}"'
    assert _sample(text, requests, f'{read},status="404"') == 2
    assert _sample(text, latency, read) == 2
