"""A read by id and a batch read serialise their answers on the worker thread that read
them (``JsonAnswer`` in api/_plain_requests.py), not on the event loop: the bytes and the
headers a client gets are the ones FastAPI makes of the same answer through the route's
own response model, on the plain path and on FastAPI's alike (each test runs on both)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from palimpsest.api._deps import get_clock
from palimpsest.api._plain_requests import model_bytes
from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.routers._memories import router
from palimpsest.api.schemas._memories import MemoryBatchPublic
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.as_of import belief_as_of
from palimpsest.projections.views.current_beliefs import CurrentBelief, PendingBelief
from palimpsest.projections.views.current_reads import read_current, read_current_ids
from tests.api.helpers import post, remember
from tests.conftest import Tenant, drain_until_caught_up

AT = datetime.now(UTC) + timedelta(minutes=5)
"""The app's clock in these tests: the answer computed here is the one the route computes."""


@pytest.fixture(params=["plain", "fastapi"])
def fixed(runtime: Runtime, request: pytest.FixtureRequest) -> Iterator[TestClient]:
    """A client of an app whose clock is :data:`AT`; on FastAPI's path, through a
    dependency override (any override leaves every request to FastAPI's handler)."""
    app = create_app(ApiSettings(), runtime, clock=lambda: AT)
    if request.param == "fastapi":
        app.dependency_overrides[get_clock] = lambda: lambda: AT
    with TestClient(app) as client:
        yield client


def _route(path: str) -> APIRoute:
    (route,) = [
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == path and r.methods == {"GET"}
    ]
    return route


def _fastapi_bytes(path: str, answer: Any) -> bytes:
    """What FastAPI sends for ``answer`` from the route of ``path``: its response model's
    serialisation (``fastapi.routing.serialize_response``, as its handler calls it)."""
    return asyncio.run(model_bytes(_route(path), answer))


def _names(answer: Any) -> list[str]:
    return [name for name, _ in answer.headers.multi_items()]


def test_a_current_read_answers_the_bytes_fastapi_makes_of_it(
    fixed: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(fixed, headers, type="preference", content="Prefers tea, « sans sucre »")
    memory_id = uuid.UUID(memory["id"])
    drain_until_caught_up(runtime)
    # Computed before the read: the read's own access is stamped after its answer.
    answer = read_current(runtime.log, tenant.id, memory_id, AT)
    assert isinstance(answer, CurrentBelief) and answer.salience is not None

    read = fixed.get(f"/v1/memories/{memory_id}", headers=headers)

    assert read.status_code == 200
    assert read.content == _fastapi_bytes("/v1/memories/{memory_id}", answer)
    assert _names(read) == ["content-length", "content-type", "x-content-type-options"]
    assert read.headers["content-type"] == "application/json"


def test_a_pending_read_answers_its_bytes_and_retry_after_where_fastapi_put_it(
    fixed: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(fixed, headers, type="fact", content="Lives in Lyon")
    drain_until_caught_up(runtime)
    post(fixed, f"/v1/memories/{memory['id']}/versions", {"content": "Lives in Oslo"}, headers)
    answer = read_current(runtime.log, tenant.id, uuid.UUID(memory["id"]), AT)
    assert isinstance(answer, PendingBelief)

    read = fixed.get(f"/v1/memories/{memory['id']}", headers=headers)

    assert read.status_code == 200
    assert read.content == _fastapi_bytes("/v1/memories/{memory_id}", answer)
    # After the answer's own headers, as FastAPI adds those the endpoint set.
    assert _names(read) == [
        "content-length",
        "content-type",
        "retry-after",
        "x-content-type-options",
    ]
    assert read.headers["retry-after"] == "1"


def test_an_as_of_read_answers_the_bytes_fastapi_makes_of_it(
    fixed: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(fixed, headers, type="fact", content="Lives in Lyon")
    position = int(memory["position"])
    post(fixed, f"/v1/memories/{memory['id']}/versions", {"content": "Lives in Oslo"}, headers)
    answer = belief_as_of(runtime.log, tenant.id, uuid.UUID(memory["id"]), position)

    read = fixed.get(f"/v1/memories/{memory['id']}?at_position={position}", headers=headers)

    assert read.status_code == 200
    assert read.content == _fastapi_bytes("/v1/memories/{memory_id}", answer)
    assert read.json()["status"] == "as_of"


@pytest.mark.parametrize("include_content", ["true", "false"])
def test_a_batch_answers_the_bytes_fastapi_makes_of_it(
    fixed: TestClient, tenant: Tenant, runtime: Runtime, include_content: str
) -> None:
    headers = tenant.headers()
    current = [
        uuid.UUID(remember(fixed, headers, type="fact", content=f"Fact {i}")["id"])
        for i in range(3)
    ]
    drain_until_caught_up(runtime)
    pending = uuid.UUID(remember(fixed, headers, type="fact", content="Not projected")["id"])
    unknown = uuid.uuid4()
    wanted = [current[2], unknown, pending, current[0], current[1], current[0]]
    found = {
        i.id: i
        for i in read_current_ids(
            runtime.log, tenant.id, wanted, AT, content=include_content == "true"
        )
    }
    order = list(dict.fromkeys(wanted))
    answer = MemoryBatchPublic(
        items=[found[i] for i in order if i in found],
        not_found=[i for i in order if i not in found],
    )
    assert [item.status for item in answer.items] == ["current", "pending", "current", "current"]

    query = "&".join(f"ids={i}" for i in wanted)
    read = fixed.get(
        f"/v1/memories/batch?{query}&include_content={include_content}", headers=headers
    )

    assert read.status_code == 200
    assert read.content == _fastapi_bytes("/v1/memories/batch", answer)
    assert _names(read) == ["content-length", "content-type", "x-content-type-options"]
