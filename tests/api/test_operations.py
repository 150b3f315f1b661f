"""Operators' endpoints and the problem mapping."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence

import pytest
from fastapi.testclient import TestClient

import palimpsest.domain.errors
import palimpsest.projections.store.errors
from palimpsest.api._problems import PROBLEMS
from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.settings import EmbeddingSettings
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.conftest import Tenant


def test_healthz_is_liveness_only(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


class _GatedEmbedder:
    """An embedder whose model takes as long to load as the test says."""

    model_id = "gated-384"
    dimension = 384

    def __init__(self) -> None:
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        assert self.release.wait(30), "the test never let the model load"
        return [[1.0] + [0.0] * 383 for _ in texts]


@pytest.fixture
def own_runtime(runtime: Runtime) -> Iterator[Callable[[_GatedEmbedder], Runtime]]:
    """Make a process's runtime on the session's database and log with an embedder of its
    own. Its publication watch, which ``create_app`` starts, is stopped afterwards (the
    log is the session's, so it is not closed): left listening, it outlived the run."""
    made: list[Runtime] = []

    def make(embedder: _GatedEmbedder) -> Runtime:
        made.append(Runtime(runtime.database, runtime.log, runtime.embedding, embedder))
        return made[-1]

    yield make
    for own in made:
        own.publications.stop()


def test_readyz_is_not_ready_until_the_embedder_has_loaded_and_while_drains_are_down(
    own_runtime: Callable[[_GatedEmbedder], Runtime],
) -> None:
    # Given a process whose embedder is still loading, and whose drain loop runs
    embedder = _GatedEmbedder()
    own = own_runtime(embedder)
    drains = {"running": True}
    app = create_app(ApiSettings(), own, lambda: None, drains_running=lambda: drains["running"])
    loading = threading.Thread(target=own.load_embedder)
    loading.start()
    with TestClient(app) as client:
        # Then it is alive but not ready, and says what is missing
        assert client.get("/healthz").status_code == 200
        waiting = client.get("/readyz")
        assert waiting.status_code == 503
        assert waiting.headers["content-type"] == "application/problem+json"
        assert waiting.json()["type"] == "urn:palimpsest:problem:not-ready"
        assert waiting.json()["missing"] == ["embedder"]
        assert waiting.json()["checks"] == {
            "database": "ok",
            "migrations": "ok",
            "embedder": "missing",
            "drains": "ok",
        }
        assert "Retry-After" in waiting.headers

        # When the model has loaded, it is ready
        embedder.release.set()
        loading.join(30)
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "checks": {"database": "ok", "migrations": "ok", "embedder": "ok", "drains": "ok"},
        }

        # And when its drain loop stops, it is no longer ready
        drains["running"] = False
        stopped = client.get("/readyz")
        assert stopped.status_code == 503 and stopped.json()["missing"] == ["drains"]


class _SlowToMake(EmbeddingSettings):
    """Settings whose embedder takes a while to make, as importing a model's runtime
    does on a process's first use: the window in which serve's loader thread and its
    drains both ask for the embedder."""

    def make_embedder(self) -> Embedder:
        time.sleep(0.05)
        made = _GatedEmbedder()
        made.release.set()
        return made


def test_readyz_is_ready_when_the_drains_ask_for_the_embedder_while_it_loads(
    runtime: Runtime,
) -> None:
    # Given a process that has not made its embedder yet (as serve starts)
    own = Runtime(runtime.database, runtime.log, _SlowToMake())
    app = create_app(ApiSettings(), own, lambda: None, drains_running=lambda: True)
    try:
        with TestClient(app) as client:
            # When its loader and three other threads (the drains, a recall) ask at once
            start = threading.Barrier(4)
            seen: list[Embedder] = []

            def load() -> None:
                start.wait()
                own.load_embedder()

            def ask() -> None:
                start.wait()
                seen.append(own.embedder)

            threads = [threading.Thread(target=load)]
            threads += [threading.Thread(target=ask) for _ in range(3)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)

            # Then one embedder was made, the one every thread uses, and it is ready
            assert all(embedder is own.embedder for embedder in seen)
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
    finally:
        own.publications.stop()


def test_readyz_reports_a_schema_behind_this_code(
    own_runtime: Callable[[_GatedEmbedder], Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    own = own_runtime(_GatedEmbedder())
    own.embedder_loaded.set()
    monkeypatch.setattr(
        "palimpsest.api.routers._health.schema_revisions", lambda _database: ["0001"]
    )
    with TestClient(create_app(ApiSettings(), own)) as client:
        behind = client.get("/readyz")
    assert behind.status_code == 503
    assert behind.json()["type"] == "urn:palimpsest:problem:not-ready"
    assert behind.json()["missing"] == ["migrations"]
    assert behind.json()["checks"]["drains"] == "external"


def test_no_page_loads_scripts_from_a_cdn(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        page = client.get(path)
        assert page.status_code == 404, path
        assert "cdn" not in page.text.lower()
    assert client.get("/openapi.json").json()["info"]["title"] == "palimpsest"


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
        "/readyz",
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
        for module in (palimpsest.domain.errors, palimpsest.projections.store.errors)
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, PalimpsestError)
    ]
    assert classes
    for cls in classes:
        assert cls in PROBLEMS, f"{cls.__name__} has no problem type in api/_problems.py"


def test_a_method_a_path_does_not_take_is_a_405_problem_naming_those_it_does(
    client: TestClient, tenant: Tenant
) -> None:
    refused = client.delete("/v1/memories", headers=tenant.headers())
    assert refused.status_code == 405
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "urn:palimpsest:problem:method-not-allowed"
    assert set(refused.headers["allow"].replace(" ", "").split(",")) == {"GET", "POST"}
