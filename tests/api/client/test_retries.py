"""Retries: backoff honouring ``Retry-After``, one ``Idempotency-Key`` for every attempt
of a call, so an answer lost after the server committed is replayed, never written
twice; and no answer at all raises ``APIConnectionError``."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx2
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from palimpsest.api.client import APIConnectionError, AsyncClient, Client, RetryPolicy
from palimpsest.api.client import _calls as calls
from palimpsest.api.client.errors import DatabaseUnavailableError
from tests.api.live_server import live_server
from tests.conftest import Tenant

FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05)


def _flaky_app(answers: list[tuple[int, dict[str, str]]], seen: list[dict[str, str]]) -> FastAPI:
    """An app answering each request with the next of ``answers`` (then 200), recording
    each request's headers."""
    app = FastAPI()

    @app.post("/v1/observations")
    async def create(request: Request) -> JSONResponse:
        seen.append(dict(request.headers))
        if len(seen) <= len(answers):
            status, headers = answers[len(seen) - 1]
            problem = {"type": "urn:palimpsest:problem:database-unavailable", "status": status}
            return JSONResponse(problem, status_code=status, headers=headers)
        return JSONResponse(
            {
                "id": "00000000-0000-0000-0000-000000000001",
                "position": 7,
                "retention_deadline": "2030-01-01T00:00:00Z",
            },
            status_code=201,
        )

    return app


def test_retries_wait_as_retry_after_says_with_one_idempotency_key() -> None:
    seen: list[dict[str, str]] = []
    app = _flaky_app([(429, {"Retry-After": "1"}), (503, {"Retry-After": "0"})], seen)
    with live_server(app) as url, Client(url, token="pal_t_s", retry=FAST) as client:
        started = time.monotonic()
        created = client.create_observation("hello")
        elapsed = time.monotonic() - started
    assert created.position == 7
    assert len(seen) == 3
    assert elapsed >= 1.0  # the 429's Retry-After, not the 10 ms backoff
    keys = {headers["idempotency-key"] for headers in seen}
    assert len(keys) == 1 and all(h["authorization"] == "Bearer pal_t_s" for h in seen)


def test_a_problem_still_there_after_the_last_retry_raises_its_class() -> None:
    seen: list[dict[str, str]] = []
    app = _flaky_app([(503, {})] * 3, seen)
    with (
        live_server(app) as url,
        Client(url, retry=FAST) as client,
        pytest.raises(DatabaseUnavailableError),
    ):
        client.create_observation("hello")
    assert len(seen) == 3  # the first attempt and two retries


def test_no_answer_raises_a_connection_error_after_the_retries() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        Client(f"http://127.0.0.1:{port}", retry=FAST) as client,
        pytest.raises(APIConnectionError),
    ):
        client.read_revision()


class _LoseFirstAnswer(httpx2.HTTPTransport):
    """Sends every request to the server, but loses the first answer of a write (the
    server committed; the client sees a dropped connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx2.Request] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        self.sent.append(request)
        if request.method == "POST" and len(self.sent) == 1:
            response.read()
            response.close()
            raise httpx2.ReadError("connection lost after the server answered", request=request)
        return response


class _AsyncLoseFirstAnswer(httpx2.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx2.Request] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        self.sent.append(request)
        if request.method == "POST" and len(self.sent) == 1:
            await response.aread()
            await response.aclose()
            raise httpx2.ReadError("connection lost after the server answered", request=request)
        return response


def _memories(base_url: str, tenant: Tenant) -> list[Any]:
    with Client(base_url, token=tenant.admin.token) as reader:
        return list(reader.iter_memories())


def test_a_write_whose_answer_was_lost_is_replayed_not_duplicated(
    base_url: str, tenant: Tenant
) -> None:
    transport = _LoseFirstAnswer()
    with (
        httpx2.Client(transport=transport) as http,
        Client(base_url, token=tenant.token("writer"), http_client=http, retry=FAST) as client,
    ):
        created = client.create_memory("written once", type="note", scope="s")
    assert len(transport.sent) == 2
    assert (
        transport.sent[0].headers["idempotency-key"] == transport.sent[1].headers["idempotency-key"]
    )
    assert [m.id for m in _memories(base_url, tenant)] == [created.id]


def test_the_async_client_replays_a_lost_write_too(base_url: str, tenant: Tenant) -> None:
    transport = _AsyncLoseFirstAnswer()

    async def scenario() -> Any:
        async with (
            httpx2.AsyncClient(transport=transport) as http,
            AsyncClient(base_url, token=tenant.token("writer"), http_client=http, retry=FAST) as c,
        ):
            return await c.create_memory("written once", type="note", scope="s")

    created = asyncio.run(scenario())
    assert len(transport.sent) == 2
    assert [m.id for m in _memories(base_url, tenant)] == [created.id]


def test_a_key_of_your_own_makes_a_later_retry_safe(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        call = calls.create_memory("sent twice, kept once", type="note", scope="s")
        first = client.send(call, idempotency_key="job-42")
        again = client.send(call, idempotency_key="job-42")
    assert again == first
    assert [m.id for m in _memories(base_url, tenant)] == [first.id]


def test_the_async_client_waits_as_retry_after_says() -> None:
    seen: list[dict[str, str]] = []
    app = _flaky_app([(503, {"Retry-After": "1"})], seen)

    async def scenario(url: str) -> float:
        async with AsyncClient(url, retry=FAST) as client:
            started = time.monotonic()
            await client.create_observation("hello")
            return time.monotonic() - started

    with live_server(app) as url:
        elapsed = asyncio.run(scenario(url))
    assert len(seen) == 2 and elapsed >= 1.0
    assert seen[0]["idempotency-key"] == seen[1]["idempotency-key"]
