"""Operators' endpoints and the problem mapping."""

from __future__ import annotations

import inspect

from fastapi.testclient import TestClient

import domain.errors
import projections.store.errors
from api.problems import PROBLEMS
from domain.errors import PalimpsestError
from tests.api.helpers import remember
from tests.conftest import Tenant


def test_healthz_reports_the_database(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_metrics_count_requests_by_route_and_status(client: TestClient, tenant: Tenant) -> None:
    remember(client, tenant.headers())
    text = client.get("/metrics").text
    assert 'palimpsest_http_requests_total{method="POST",route="/v1/memories",status="201"}' in text
    assert "palimpsest_http_request_duration_seconds_bucket" in text


def test_openapi_documents_every_route_with_typed_bodies(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path in [
        "/v1/observations",
        "/v1/memories",
        "/v1/memories/{memory_id}/versions",
        "/v1/memories/{memory_id}/edges",
        "/v1/batch",
        "/v1/observations/{observation_id}",
        "/v1/observations/{observation_id}/content",
        "/healthz",
        "/metrics",
    ]:
        assert path in paths, path
    assert "MemoryCreate" in spec["components"]["schemas"]
    assert (
        "application/problem+json" in paths["/v1/memories"]["post"]["responses"]["422"]["content"]
    )


def test_every_error_class_has_a_problem_type() -> None:
    classes = [
        c
        for module in (domain.errors, projections.store.errors)
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, PalimpsestError)
    ]
    assert classes
    for cls in classes:
        assert cls in PROBLEMS, f"{cls.__name__} has no problem type in api/problems.py"
