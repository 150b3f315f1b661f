"""Embedders: the local model, an OpenAI-compatible endpoint, and a model change.

The endpoint is a real HTTP server on loopback speaking the OpenAI
``/v1/embeddings`` protocol, serving vectors of the same local model (as a
deployment's own model server would), so both backends must agree.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli import main
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.recall.embedders import LocalModel, OpenAICompatibleEmbedder
from palimpsest.projections.recall.indexing import index_pending, unindexed_count
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.errors import EmbedderUnavailableError
from tests.api.helpers import post, remember
from tests.conftest import RunDatabase, Tenant, fresh_database, index_until_caught_up, owner_rows


@pytest.fixture(scope="module")
def model_server(runtime: Runtime) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An OpenAI-compatible endpoint on loopback; yields its URL and the requests seen."""
    local = runtime.embedder
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            if body["model"] == "broken":
                self.send_response(500)
                self.end_headers()
                return
            vectors = local.embed(body["input"])
            scaled = [[x * 3.0 for x in v] for v in vectors]  # not normalised, on purpose
            payload = {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": i, "embedding": v}
                    for i, v in reversed(list(enumerate(scaled)))
                ],
                "model": body["model"],
            }
            data = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", seen
    server.shutdown()
    server.server_close()


def test_both_backends_give_the_same_unit_vectors(
    runtime: Runtime, model_server: tuple[str, list[dict[str, Any]]]
) -> None:
    url, seen = model_server
    local = runtime.embedder
    assert isinstance(local, LocalModel) and local.dimension == 384  # either runtime
    remote = OpenAICompatibleEmbedder(url, "minilm-served", 384, api_key="k", batch_size=2)
    texts = ["I prefer dark mode", "The deploy is on Friday", "Tea, not coffee"]
    for a, b in zip(local.embed(texts), remote.embed(texts), strict=True):
        assert math.isclose(sum(x * x for x in b), 1.0, rel_tol=1e-6)
        assert sum(x * y for x, y in zip(a, b, strict=True)) > 0.9999
    assert [len(r["input"]) for r in seen[-2:]] == [2, 1]  # batched
    assert seen[-1]["auth"] == "Bearer k" and seen[-1]["path"] == "/v1/embeddings"


def test_a_failing_endpoint_is_a_clear_error(
    model_server: tuple[str, list[dict[str, Any]]],
) -> None:
    url, _ = model_server
    with pytest.raises(EmbedderUnavailableError, match="failed"):
        OpenAICompatibleEmbedder(url, "broken", 384).embed(["x"])
    with pytest.raises(EmbedderUnavailableError, match="dimension 10"):
        OpenAICompatibleEmbedder(url, "minilm-served", 10).embed(["x"])
    with pytest.raises(EmbedderUnavailableError):
        OpenAICompatibleEmbedder("http://127.0.0.1:9", "m", 384, timeout_s=2).embed(["x"])


@pytest.fixture
def own_store(
    runtime: Runtime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Runtime, RunDatabase]]:
    """A store of its own: a model change re-embeds every tenant of a store."""
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        own.use_embedder(runtime.embedder)  # the model is loaded once per session
        yield own, database
        own.close()


@pytest.mark.slow
def test_a_model_change_reindexes_while_recall_keeps_answering(
    own_store: tuple[Runtime, RunDatabase],
    model_server: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, _ = model_server
    runtime, test_database = own_store
    tenant = Tenant(runtime, create_tenant(runtime.log, "model-change"))
    headers = tenant.headers()
    client = TestClient(create_app(ApiSettings(), runtime))
    # Notes: near-identical facts would each be possibly superseded by the next (recall
    # ranks the newest first), which is not what this test is about.
    ids = [
        remember(client, headers, type="note", content=f"Fact number {i}")["id"] for i in range(5)
    ]
    index_until_caught_up(runtime, tenant.id)
    remote = OpenAICompatibleEmbedder(url, "minilm-served", 384)
    try:
        runtime.use_embedder(remote)
        # The first pass notices the model change and makes every memory due again;
        # recall by meaning answers from what the new model has indexed so far (by
        # words, from the text index, which no model change touches).
        index_pending(runtime.log, remote, limit=2)
        assert unindexed_count(runtime.log, tenant.id) == 5
        status = client.get("/v1/revision", headers=headers).json()
        assert status["unindexed_memories"] == 5
        first = post(
            client, "/v1/recall", {"query": "fact number 3", "mode": "vector", "k": 3}, headers
        ).json()
        assert first["model"] == "minilm-served" and first["items"] == []
        index_pending(runtime.log, remote, limit=2)  # a partial pass
        partial = post(
            client, "/v1/recall", {"query": "fact number 3", "mode": "vector", "k": 5}, headers
        ).json()
        assert len(partial["items"]) == 2 and unindexed_count(runtime.log, tenant.id) == 3
        for name, value in {
            **test_database.env,
            "PALIMPSEST_EMBEDDER": "http",
            "PALIMPSEST_EMBEDDING_URL": url,
            "PALIMPSEST_EMBEDDING_MODEL": "minilm-served",
        }.items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        assert main(["reindex"]) == 0
        out, err = capsys.readouterr()
        assert json.loads(out) == {"embedded": 3, "model": "minilm-served"}
        assert "reindex: done" in err
        done = post(
            client, "/v1/recall", {"query": "fact number 3", "mode": "vector", "k": 5}, headers
        ).json()
        assert unindexed_count(runtime.log, tenant.id) == 0 and len(done["items"]) == 5
        assert done["items"][0]["id"] == ids[3]
        # Rows of the old model went once the tenant was fully indexed with the new one.
        models = owner_rows(
            runtime,
            "SELECT DISTINCT model_id FROM {schema}.memory_embeddings WHERE tenant_id = %s",
            tenant.id,
        )
        assert models == [("minilm-served",)]
    finally:
        client.close()


def test_the_local_embedder_without_its_extra_is_a_one_line_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deployment installed without ``palimpsest-memory[local]`` (no torch) that still
    chooses the local embedder is refused at once, in one line; one embedding over
    HTTP never asks for the local model."""
    import importlib.util

    from palimpsest.domain.errors import ConfigurationError
    from palimpsest.projections.recall.embedders import OpenAICompatibleEmbedder
    from palimpsest.projections.recall.settings import EmbeddingSettings

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    with pytest.raises(ConfigurationError) as refused:
        EmbeddingSettings(embedder="local").make_embedder()
    assert "\n" not in str(refused.value) and "palimpsest-memory[local]" in str(refused.value)
    http = EmbeddingSettings(
        embedder="http", embedding_url="http://127.0.0.1:9", embedding_model="m"
    ).make_embedder()
    assert isinstance(http, OpenAICompatibleEmbedder)
