"""Idle streams and waits cannot exhaust the server, and each token and tenant is capped.

An event stream used to sleep in a worker thread between polls: 45 idle
streams held 45 of the ~40 threads every sync route shares, and ``/healthz``
took 12 s. Now a stream awaits its tenant's writes and publications on the
event loop, holding no thread, and a token (or a tenant) past its cap is
refused with 429 ``concurrency-limit``. These tests run a real uvicorn
server on loopback with real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import resource
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import pytest
from fastapi import FastAPI

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.conftest import Tenant, wait_until_async

STREAMS = 500
WAITS = 200
STREAMS_PER_TOKEN = 50
WAITS_PER_TOKEN = 100
SAMPLES = 100
P99_S = 0.1
"""The 99th percentile a request answers within while others hold streams and waits
(or 3x its own, measured in the same run with nothing held, if that is more)."""
NOWHERE = 999_999_999
"""A log position no test reaches: a stream after it stays idle."""


def _raise_file_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} file descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


class _Connection:
    """One HTTP/1.1 request on its own socket, left open (an idle stream or a wait)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def send(cls, base: str, path: str, token: str) -> _Connection:
        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        )
        await writer.drain()
        return cls(reader, writer)

    async def status(self) -> int:
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        return int(head.split(b" ", 2)[1])

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def _open_all(base: str, path: str, tokens: list[str], each: int) -> list[_Connection]:
    """Send ``path`` ``each`` times per token, each on its own socket, 50 at a time."""
    gate = asyncio.Semaphore(50)

    async def send(token: str) -> _Connection:
        async with gate:
            return await _Connection.send(base, path, token)

    return await asyncio.gather(*(send(t) for t in tokens for _ in range(each)))


async def _latency(client: httpx.AsyncClient, method: str, url: str, **kw: Any) -> float:
    started = time.perf_counter()
    try:
        response = await client.request(method, url, **kw)
    except httpx.TimeoutException:
        return math.inf  # starved
    assert response.status_code < 300, response.text
    return time.perf_counter() - started


def _p99(samples: list[float]) -> float:
    return sorted(samples)[math.ceil(0.99 * len(samples)) - 1]


def _assert_prompt(loaded: dict[str, float], idle: dict[str, float]) -> None:
    """Starved requests take seconds (45 idle streams once made /healthz take 12 s);
    prompt ones stay within :data:`P99_S`, or within 3x their pace with nothing open."""
    bounds = {k: max(P99_S, 3 * p99) for k, p99 in idle.items()}
    assert all(loaded[k] < bounds[k] for k in bounds), {"loaded": loaded, "idle": idle}


def _open(app: FastAPI) -> dict[str, int]:
    held: dict[str, int] = app.state.admission.open()
    return held


async def _p99_of_others(
    client: httpx.AsyncClient, memory: str, headers: dict[str, str]
) -> dict[str, float]:
    """Return the 99th percentile of /healthz, and of reads and of writes of another
    tenant, over :data:`SAMPLES` requests each."""
    health, reads, writes = [], [], []
    for n in range(SAMPLES):
        health.append(await _latency(client, "GET", "/healthz"))
        reads.append(await _latency(client, "GET", f"/v1/memories/{memory}", headers=headers))
        writes.append(
            await _latency(
                client,
                "POST",
                "/v1/observations",
                json={"content": f"meanwhile {n}"},
                headers=headers,
            )
        )
    return {"health": _p99(health), "read": _p99(reads), "write": _p99(writes)}


async def _other_tenant(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> tuple[str, dict[str, float]]:
    """Create a memory of the other tenant; return it, and the 99th percentiles of
    :func:`_p99_of_others` with nothing held open: this machine's own pace (a shared
    machine runs several times slower at times)."""
    created = await client.post(
        "/v1/memories",
        json={"type": "fact", "scope": "user", "content": "tenant B's"},
        headers=headers,
    )
    memory = str(created.json()["id"])
    return memory, await _p99_of_others(client, memory, headers)


@contextlib.asynccontextmanager
async def _all_closed(connections: list[_Connection]) -> AsyncIterator[list[_Connection]]:
    try:
        yield connections
    finally:
        await asyncio.gather(*(c.close() for c in connections))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_idle_streams_and_waits_leave_health_and_other_tenants_prompt_and_are_capped(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    # Given a server with no drain (tenant A's memory stays pending), and caps
    # that admit exactly the load below.
    _raise_file_limit(4 * (STREAMS + WAITS) + 256)  # both ends of each socket, and spare
    app = create_app(
        ApiSettings(
            streams_per_token=STREAMS_PER_TOKEN,
            streams_per_tenant=STREAMS,
            waits_per_token=WAITS_PER_TOKEN,
            waits_per_tenant=WAITS,
        ),
        runtime,
    )
    stream_tokens = [tenant.token("reader") for _ in range(STREAMS // STREAMS_PER_TOKEN)]
    wait_tokens = [tenant.token("reader") for _ in range(WAITS // WAITS_PER_TOKEN)]
    b_headers = other_tenant.headers("writer")
    baseline = runtime.publications.waiting()

    async def scenario(base: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            created = await client.post(
                "/v1/memories",
                json={"type": "fact", "scope": "user", "content": "never drained"},
                headers=tenant.headers("writer"),
            )
            assert created.status_code == 201, created.text
            pending = created.json()["id"]
            b_memory, found["p99_idle"] = await _other_tenant(client, b_headers)

            # When tenant A holds 500 idle streams and 200 waits of 20 s...
            idle = f"/v1/events/stream?after={NOWHERE}"
            streams = await _open_all(base, idle, stream_tokens, STREAMS_PER_TOKEN)
            async with _all_closed(streams):
                found["stream_statuses"] = await asyncio.gather(*(s.status() for s in streams))
                waited = f"/v1/memories/{pending}?wait=20"
                async with _all_closed(await _open_all(base, waited, wait_tokens, WAITS_PER_TOKEN)):
                    await wait_until_async(
                        lambda: _open(app) == {"stream": STREAMS, "wait": WAITS},
                        15,
                        "every stream and wait is open",
                    )
                    # ...then /healthz and tenant B's reads and writes answer at once.
                    found["p99"] = await _p99_of_others(client, b_memory, b_headers)
                    found["still_open"] = _open(app)

                    # One more stream, or wait, of a token at its cap is refused.
                    over = await client.get(
                        "/v1/events/stream",
                        params={"after": NOWHERE},
                        headers={"Authorization": f"Bearer {stream_tokens[0]}"},
                    )
                    found["over_stream"] = over
                    found["over_wait"] = await client.get(
                        f"/v1/memories/{pending}",
                        params={"wait": 20},
                        headers={"Authorization": f"Bearer {wait_tokens[0]}"},
                    )
                    found["metrics"] = (await client.get("/metrics")).text

                    # Closing one of its streams frees a place for the token at once.
                    await streams[0].close()
                    await wait_until_async(
                        lambda: _open(app)["stream"] == STREAMS - 1, 5, "the closed stream is freed"
                    )
                    again = await _Connection.send(
                        base, f"/v1/events/stream?after={NOWHERE}", stream_tokens[0]
                    )
                    found["again"] = await again.status()
                    await again.close()
        await wait_until_async(
            lambda: _open(app) == {"stream": 0, "wait": 0}, 10, "every slot is freed"
        )
        await wait_until_async(
            lambda: runtime.publications.waiting() == baseline, 10, "every subscription ends"
        )
        found["attached"] = app.state.writes.waiting()
        return found

    with live_server(app) as base:
        found = asyncio.run(scenario(base))

    assert found["stream_statuses"] == [200] * STREAMS
    assert found["still_open"] == {"stream": STREAMS, "wait": WAITS}, "a wait ended early"
    _assert_prompt(found["p99"], found["p99_idle"])
    for over, retry_after in ((found["over_stream"], "5"), (found["over_wait"], "1")):
        assert over.status_code == 429, over.text
        assert over.headers["content-type"] == "application/problem+json"
        assert over.json()["type"] == "urn:palimpsest:problem:concurrency-limit"
        assert over.headers["retry-after"] == retry_after
    metrics = found["metrics"]
    assert 'palimpsest_open{kind="stream"} 500.0' in metrics
    assert 'palimpsest_open{kind="wait"} 200.0' in metrics
    assert 'palimpsest_concurrency_refusals_total{kind="stream",scope="token"} 1.0' in metrics
    assert 'palimpsest_concurrency_refusals_total{kind="wait",scope="token"} 1.0' in metrics
    assert found["again"] == 200
    assert found["attached"] == 0


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_tenant_past_its_cap_is_refused_whichever_token_asks(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    app = create_app(ApiSettings(streams_per_token=2, streams_per_tenant=3), runtime)

    async def scenario(base: str) -> tuple[list[int], httpx.Response, int]:
        tokens = [tenant.token("reader") for _ in range(2)]
        path = f"/v1/events/stream?after={NOWHERE}"
        opened = [await _Connection.send(base, path, t) for t in (*tokens, tokens[1])]
        async with _all_closed(opened), httpx.AsyncClient(base_url=base, timeout=5) as client:
            statuses = [await c.status() for c in opened]
            # A token holding one stream, of a tenant holding three.
            refused = await client.get(
                "/v1/events/stream",
                params={"after": NOWHERE},
                headers={"Authorization": f"Bearer {tokens[0]}"},
            )
            other = await _Connection.send(base, path, other_tenant.token("reader"))
            other_status = await other.status()  # another tenant is not affected
            await other.close()
        return statuses, refused, other_status

    with live_server(app) as base:
        statuses, refused, other_status = asyncio.run(scenario(base))

    assert statuses == [200, 200, 200]
    assert refused.status_code == 429
    assert refused.json()["type"] == "urn:palimpsest:problem:concurrency-limit"
    assert other_status == 200


async def _next_event(stream: _Connection) -> str:
    """Read SSE messages until one carrying an event; return its ``event`` field."""
    while True:
        message = (await stream.reader.readuntil(b"\n\n")).decode()
        for line in message.splitlines():
            if line.startswith("event: "):
                return line.removeprefix("event: ")


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_stream_is_woken_by_a_write_or_a_publication_and_a_dropped_one_frees_its_place(
    runtime: Runtime, tenant: Tenant, client: Any
) -> None:
    # Given a server whose token may hold one stream, and a stream open on it.
    app = create_app(ApiSettings(streams_per_token=1), runtime)
    token = tenant.token("reader")
    headers = tenant.headers("writer")
    baseline = runtime.publications.waiting()

    async def scenario(base: str) -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with httpx.AsyncClient(base_url=base, timeout=5) as http:
            head = (await http.get("/v1/events", params={"limit": 1000}, headers=headers)).json()
            stream = await _Connection.send(
                base, f"/v1/events/stream?after={head['next_after']}", token
            )
            assert await stream.status() == 200
            # The stream's first line comes once it listens: what follows wakes it.
            first = await asyncio.wait_for(stream.reader.readuntil(b"\n\n"), 5)
            assert first.endswith(b": palimpsest event feed\n\n")  # after a chunk size

            # When this server records an observation (no drain publishes anything)...
            started = time.monotonic()
            written = await http.post(
                "/v1/observations", json={"content": "seen at once"}, headers=headers
            )
            assert written.status_code == 201, written.text
            found["observed"] = await asyncio.wait_for(_next_event(stream), 5)
            found["observed_after"] = time.monotonic() - started

            # ...and when another process writes a memory that a drain then publishes.
            await asyncio.to_thread(
                client.post,
                "/v1/memories",
                json={"type": "fact", "scope": "user", "content": "written elsewhere"},
                headers=headers,
            )
            started = time.monotonic()
            await asyncio.to_thread(drain_revisions, runtime.log)
            found["published"] = await asyncio.wait_for(_next_event(stream), 5)
            found["published_after"] = time.monotonic() - started

            # The token's second stream is refused; dropping the first frees its place.
            found["second"] = (
                await http.get(
                    "/v1/events/stream",
                    params={"after": NOWHERE},
                    headers={"Authorization": f"Bearer {token}"},
                )
            ).status_code
            await stream.close()
            await wait_until_async(
                lambda: _open(app)["stream"] == 0, 2, "the dropped stream is freed"
            )
            found["subscriptions"] = runtime.publications.waiting() - baseline
            found["attached"] = app.state.writes.waiting()
            reopened = await _Connection.send(base, f"/v1/events/stream?after={NOWHERE}", token)
            found["reopened"] = await reopened.status()
            await reopened.close()
        return found

    with live_server(app) as base:
        found = asyncio.run(scenario(base))

    assert found["observed"] == "ObservationCaptured"
    # The stream rereads on its own only every few seconds: this was a wake-up.
    assert found["observed_after"] < 1.0, found["observed_after"]
    assert found["published"] == "MemoryCreated"
    assert found["published_after"] < 1.0, found["published_after"]
    assert found["second"] == 429
    assert found["subscriptions"] == 0 and found["attached"] == 0
    assert found["reopened"] == 200


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_write_is_never_refused_for_its_tokens_waits_it_answers_candidates_pending(
    runtime: Runtime, tenant: Tenant
) -> None:
    # Given a server that believes a drain runs (a write waits for its candidates),
    # none does, and a token that may hold one wait and holds it.
    app = create_app(ApiSettings(waits_per_token=1), runtime, wake=lambda: None)
    token = tenant.token("writer")
    auth = {"Authorization": f"Bearer {token}"}

    async def scenario(base: str) -> tuple[int, httpx.Response]:
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            body = {"type": "fact", "scope": "user", "content": "waited on"}
            pending = (await client.post("/v1/memories", json=body, headers=auth)).json()["id"]
            waiting = await _Connection.send(base, f"/v1/memories/{pending}?wait=20", token)
            async with _all_closed([waiting]):
                await wait_until_async(lambda: _open(app)["wait"] == 1, 5, "the read waits")
                refused = await client.get(f"/v1/memories/{pending}?wait=5", headers=auth)
                # When the same token writes: it has committed, so it is answered, not refused.
                written = await client.post(
                    "/v1/memories",
                    json={"type": "fact", "scope": "user", "content": "written anyway"},
                    headers=auth,
                )
        return refused.status_code, written

    with live_server(app) as base:
        refused, written = asyncio.run(scenario(base))

    assert refused == 429
    assert written.status_code == 201, written.text
    assert written.json()["potential_contradictions"]["status"] == "pending"
