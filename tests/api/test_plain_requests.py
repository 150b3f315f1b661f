"""A plain request (api/_plain_requests.py) is answered as FastAPI's handler answers it.

The same request is sent plain and again in a form FastAPI reads alike and the
plain path leaves to FastAPI: a write with ``charset=utf-8`` on its
``Content-Type``, a read with ``?wait=0`` (the default). A spy on FastAPI's
dependency solving (it changes nothing) shows which path answered each
request, so that these tests compare the two paths and not one with itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.dependencies.utils import solve_dependencies
from fastapi.testclient import TestClient

from palimpsest.api._admission import HolderDep
from palimpsest.api._deps import CallerDep, WriteDep, get_runtime
from palimpsest.api._plain_requests import plain_route
from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.routers import _memories as memories
from palimpsest.api.schemas import MemoryCreate, MemoryCreated
from palimpsest.projections.drains._tenant_erasure import erase_deleted_tenants
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up

PLAIN = "application/json"
FULL = "application/json; charset=utf-8"


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests whose dependencies FastAPI solved."""
    seen: list[str] = []

    async def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["request"].url.path)
        return await solve_dependencies(*args, **kwargs)

    monkeypatch.setattr("fastapi.routing.solve_dependencies", spy)
    return seen


def _send(
    client: TestClient,
    path: str,
    body: Any,
    headers: dict[str, str],
    content_type: str,
    **extra: str,
) -> Any:
    return client.post(
        path,
        content=body if isinstance(body, bytes) else json.dumps(body),
        headers={**headers, "Content-Type": content_type, **extra},
    )


def _verified(client: TestClient, headers: dict[str, str], solved: list[str]) -> None:
    """Have the app verify the token (a token it has not seen asks the database,
    through FastAPI's handler)."""
    assert client.get("/v1/memories", headers=headers).status_code == 200
    solved.clear()


def _both(
    client: TestClient, solved: list[str], path: str, body: Any, headers: dict[str, str]
) -> tuple[Any, Any]:
    """Send ``body`` plain, then through FastAPI's handler; return both answers,
    having checked that each took the path it was meant to."""
    _verified(client, headers, solved)
    plain = _send(client, path, body, headers, PLAIN)
    assert solved == [], "the plain request went through FastAPI's handler"
    full = _send(client, path, body, headers, FULL)
    assert solved == [path], "the request with a charset did not go through FastAPI's handler"
    solved.clear()
    return plain, full


def _general(answer: dict[str, Any]) -> Any:
    """Return a write's answer with what differs between two writes of the same
    body (its ids, wherever they appear, and its log position) replaced."""
    text = json.dumps({**answer, "position": "<position>"})
    for name in ("version_id", "id"):
        if name in answer:
            text = text.replace(answer[name], f"<{name}>")
    return json.loads(text)


def _headers(answer: Any) -> list[tuple[str, str]]:
    """Return an answer's headers but its length (ids and positions differ)."""
    return sorted((k, v) for k, v in answer.headers.items() if k != "content-length")


def _alike(plain: Any, full: Any) -> None:
    assert plain.status_code == full.status_code, (plain.text, full.text)
    assert _headers(plain) == _headers(full)
    assert plain.headers["x-content-type-options"] == "nosniff"
    if plain.status_code >= 400:
        assert plain.json() == full.json()
        return
    assert _general(plain.json()) == _general(full.json())


def _read_both(
    client: TestClient, solved: list[str], path: str, headers: dict[str, str]
) -> tuple[Any, Any]:
    """Read ``path`` plain, then through FastAPI's handler (``?wait=0``, the default)."""
    _verified(client, headers, solved)
    plain = client.get(path, headers=headers)
    assert solved == [], "the plain read went through FastAPI's handler"
    full = client.get(f"{path}?wait=0", headers=headers)
    assert solved == [path], "the read with a query did not go through FastAPI's handler"
    solved.clear()
    return plain, full


def test_a_read_is_answered_alike_on_both_paths_pending_current_or_missing(
    client: TestClient, tenant: Tenant, solved: list[str], runtime: Runtime
) -> None:
    headers = tenant.headers("reader")
    created = remember(client, tenant.headers())
    path = f"/v1/memories/{created['id']}"
    plain, full = _read_both(client, solved, path, headers)  # no drain has run yet
    assert plain.json()["status"] == "pending" and plain.headers["retry-after"] == "1"
    _alike(plain, full)
    drain_until_caught_up(runtime)
    plain, full = _read_both(client, solved, path, headers)
    assert plain.json()["status"] == "current"
    # Each current read is an access, and raises the memory's salience.
    assert plain.json().pop("salience") < full.json().pop("salience")
    assert _headers(plain) == _headers(full)
    assert {**plain.json(), "salience": 0} == {**full.json(), "salience": 0}
    plain, full = _read_both(client, solved, f"/v1/memories/{uuid.uuid4()}", headers)
    assert problem_slug(plain) == "not-found"
    _alike(plain, full)


@pytest.mark.parametrize(
    "body",
    [
        {"type": "note", "scope": "s", "content": "Standup moved to 10:00"},
        {"type": "fact", "scope": "s", "project": "p", "content": "The API runs on port 8080"},
        {"type": "preference", "scope": "user", "topic": "editor", "content": "Vim keys"},
    ],
    ids=["never-paired", "fact", "preference"],
)
def test_a_new_memory_is_answered_alike_on_both_paths(
    client: TestClient, tenant: Tenant, solved: list[str], body: dict[str, Any]
) -> None:
    plain, full = _both(client, solved, "/v1/memories", body, tenant.headers())
    assert plain.status_code == 201
    _alike(plain, full)


def test_a_new_version_is_answered_alike_on_both_paths(
    client: TestClient, tenant: Tenant, solved: list[str]
) -> None:
    headers = tenant.headers()
    created = remember(client, headers)
    solved.clear()
    path = f"/v1/memories/{created['id']}/versions"
    plain, full = _both(client, solved, path, {"content": "Prefers light mode"}, headers)
    assert plain.status_code == 201
    _alike(plain, full)
    versions = client.get(f"/v1/memories/{created['id']}/versions", headers=headers).json()
    assert [v["content"] for v in versions["versions"]][1:] == ["Prefers light mode"] * 2


def test_what_the_write_refuses_is_answered_alike_on_both_paths(
    client: TestClient, tenant: Tenant, solved: list[str]
) -> None:
    """The plain path takes the request, and the write itself refuses it: the
    exception handlers answer, as they do for FastAPI's handler."""
    path = f"/v1/memories/{uuid.uuid4()}/versions"
    plain, full = _both(client, solved, path, {"content": "x"}, tenant.headers())
    assert problem_slug(plain) == "not-found"
    _alike(plain, full)


@pytest.mark.parametrize("first", [PLAIN, FULL])
def test_a_retry_by_either_path_replays_the_first_answer_byte_for_byte(
    client: TestClient, tenant: Tenant, solved: list[str], first: str
) -> None:
    headers = {**tenant.headers(), "Idempotency-Key": f"k-{uuid.uuid4()}"}
    body = {"type": "fact", "scope": "s", "content": f"Deploys on Fridays {uuid.uuid4()}"}
    then = FULL if first == PLAIN else PLAIN
    _verified(client, tenant.headers(), solved)
    answered = _send(client, "/v1/memories", body, headers, first)
    replayed = _send(client, "/v1/memories", body, headers, then)
    assert len(solved) == 1  # one of the two through FastAPI's handler
    assert answered.status_code == replayed.status_code == 201
    assert "idempotent-replayed" not in answered.headers
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.content == answered.content


_VERSION = "/v1/memories/{id}/versions"
_BODY = b'{"content": "Prefers light mode"}'
_JSON = ("Content-Type", PLAIN)
_ADMIN = ("Authorization", "Bearer {admin}")


@pytest.mark.parametrize(
    ("path", "headers", "body", "slug"),
    [
        (_VERSION, [_JSON, ("Authorization", "Bearer {reader}")], _BODY, "forbidden"),
        (_VERSION, [_JSON, ("Authorization", "Bearer {unknown}")], _BODY, "unauthenticated"),
        (_VERSION, [_JSON, _ADMIN, _ADMIN], _BODY, "repeated-header"),
        (_VERSION, [_JSON, _ADMIN, ("Idempotency-Key", "has spaces")], _BODY, "invalid-input"),
        (_VERSION + "?wait=1", [_JSON, _ADMIN], _BODY, "unknown-query-parameter"),
        (_VERSION, [_JSON, _ADMIN], b'{"content": ""}', "validation-error"),
        (_VERSION, [_JSON, _ADMIN], b'{"content": "Prefers', "malformed-json"),
        ("/v1/memories/not-a-uuid/versions", [_JSON, _ADMIN], _BODY, "validation-error"),
    ],
    ids=[
        "reader",
        "unknown-token",
        "two-tokens",
        "bad-key",
        "query",
        "bad-body",
        "not-json",
        "not-a-uuid",
    ],
)
def test_a_request_that_is_not_plain_is_refused_by_fastapi_and_writes_nothing(
    client: TestClient,
    tenant: Tenant,
    solved: list[str],
    snapshot: Callable[[], dict[str, int]],
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    slug: str,
) -> None:
    created = remember(client, tenant.headers())
    tokens = {
        "admin": tenant.admin.token,
        "reader": tenant.token("reader"),
        "unknown": f"pal_{tenant.id.hex}_{'x' * 43}",
    }
    for token in ("admin", "reader"):
        _verified(client, {"Authorization": f"Bearer {tokens[token]}"}, solved)
    before = snapshot()
    answer = client.post(
        path.format(id=created["id"]),
        content=body,
        headers=[(name, value.format(**tokens)) for name, value in headers],
    )
    assert problem_slug(answer) == slug
    # FastAPI refuses a body that is not JSON before it solves any dependency.
    assert solved or slug == "malformed-json", "FastAPI's handler did not answer it"
    assert snapshot() == before


@pytest.mark.parametrize(
    ("path", "headers", "slug"),
    [
        ("/v1/memories/{id}", [("Authorization", "Bearer {unknown}")], "unauthenticated"),
        ("/v1/memories/{id}", [_ADMIN, _ADMIN], "repeated-header"),
        ("/v1/memories/not-a-uuid", [_ADMIN], "validation-error"),
        ("/v1/memories/{id}?nope=1", [_ADMIN], "unknown-query-parameter"),
    ],
    ids=["unknown-token", "two-tokens", "not-a-uuid", "query"],
)
def test_a_read_that_is_not_plain_is_refused_by_fastapi(
    client: TestClient,
    tenant: Tenant,
    solved: list[str],
    path: str,
    headers: list[tuple[str, str]],
    slug: str,
) -> None:
    created = remember(client, tenant.headers())
    tokens = {"admin": tenant.admin.token, "unknown": f"pal_{tenant.id.hex}_{'x' * 43}"}
    _verified(client, tenant.headers(), solved)
    answer = client.get(
        path.format(id=created["id"]),
        headers=[(name, value.format(**tokens)) for name, value in headers],
    )
    assert problem_slug(answer) == slug
    assert solved, "FastAPI's handler did not answer it"


def test_a_write_of_a_deleted_tenant_is_refused_by_fastapi_and_writes_nothing(
    client: TestClient,
    tenant: Tenant,
    solved: list[str],
    snapshot: Callable[[], dict[str, int]],
) -> None:
    """The token cache holds the tenant as closed: its writes are not plain."""
    headers = tenant.headers()
    created = remember(client, headers)
    token = client.delete("/v1/tenant", headers=headers).json()["confirmation_token"]
    assert client.delete(f"/v1/tenant?confirm={token}", headers=headers).status_code == 202
    assert client.get("/v1/memories", headers=headers).status_code == 410  # verified, closed
    solved.clear()
    before = snapshot()
    answer = _send(client, _VERSION.format(id=created["id"]), _BODY, headers, PLAIN)
    assert problem_slug(answer) == "tenant-deleted"
    assert solved, "FastAPI's handler did not answer it"
    assert snapshot() == before
    while erase_deleted_tenants(tenant.runtime.log):  # as tests that count deleted tenants expect
        pass


def test_with_a_dependency_overridden_every_write_goes_through_fastapi(
    runtime: Runtime, tenant: Tenant, solved: list[str]
) -> None:
    """Tests that override a dependency see it used on every request."""
    app = create_app(ApiSettings(), runtime)
    app.dependency_overrides[get_runtime] = lambda: runtime
    with TestClient(app) as overridden:
        _verified(overridden, tenant.headers(), solved)
        answer = _send(
            overridden,
            "/v1/memories",
            {"type": "note", "scope": "s", "content": "x"},
            tenant.headers(),
            PLAIN,
        )
    assert answer.status_code == 201
    assert solved == ["/v1/memories"]


async def _extra() -> None:
    """A dependency the plain path knows nothing of."""


def test_a_write_route_with_a_dependency_the_plain_path_would_skip_is_not_built() -> None:
    router = APIRouter()
    with pytest.raises(TypeError, match="cannot answer without"):

        @plain_route(
            router, "POST", "/x", response_model=MemoryCreated, dependencies=[Depends(_extra)]
        )
        async def endpoint(body: MemoryCreate, write: WriteDep, holder: HolderDep) -> Any:
            return None


def test_a_write_route_whose_endpoint_takes_what_a_plain_request_lacks_is_not_built() -> None:
    router = APIRouter()
    with pytest.raises(TypeError, match="cannot supply"):

        @plain_route(router, "POST", "/x", response_model=MemoryCreated)
        async def takes_the_request(
            body: MemoryCreate, write: WriteDep, holder: HolderDep, request: Request
        ) -> Any:
            return None

    with pytest.raises(TypeError, match="not embedded"):

        @plain_route(router, "POST", "/y", response_model=MemoryCreated)
        async def embedded(
            body: Annotated[MemoryCreate, Body(embed=True)], write: WriteDep, holder: HolderDep
        ) -> Any:
            return None

    with pytest.raises(TypeError, match="plain default"):

        @plain_route(router, "GET", "/z", response_model=MemoryCreated)
        async def computed(
            caller: CallerDep, n: Annotated[int, Query(default_factory=lambda: 1)]
        ) -> Any:
            return None

    with pytest.raises(TypeError, match="that way"):

        @plain_route(router, "GET", "/w", response_model=MemoryCreated)
        async def uncached(
            caller: CallerDep, runtime: Annotated[Runtime, Depends(get_runtime, use_cache=False)]
        ) -> Any:
            return None


def test_a_dependency_an_inclusion_adds_is_never_skipped(
    runtime: Runtime, tenant: Tenant, snapshot: Callable[[], dict[str, int]]
) -> None:
    """Included again under a prefix with a dependency of its own, the write route
    refuses to answer at all (FastAPI builds an included route when it first routes
    to it): nothing is written past a dependency it does not know."""
    app = create_app(ApiSettings(), runtime)
    app.include_router(memories.router, prefix="/guarded", dependencies=[Depends(_extra)])
    before = snapshot()
    with TestClient(app) as guarded, pytest.raises(TypeError, match="cannot answer without"):
        _send(
            guarded,
            "/guarded/v1/memories",
            {"type": "note", "scope": "s", "content": "x"},
            tenant.headers(),
            PLAIN,
        )
    assert snapshot() == before
