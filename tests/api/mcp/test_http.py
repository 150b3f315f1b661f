"""``/mcp`` over real streamable HTTP: uvicorn on a loopback port, two tenants' tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.mcp._http import is_loopback
from palimpsest.domain.errors import ConfigurationError
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.api.mcp.helpers import TOOLS, ok, problem, problem_type
from tests.conftest import Tenant

_JSON = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@asynccontextmanager
async def _client(url: str, token: str, **kw: Any) -> AsyncIterator[Client]:
    """An SDK client sending the token (the transport leaves a given HTTP client open)."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), **kw) as client,
    ):
        yield client


def test_two_tenants_over_http(runtime: Runtime, tenant: Tenant, other_tenant: Tenant) -> None:
    mine, theirs = tenant.token("writer"), other_tenant.token("writer")

    async def scenario(url: str) -> dict[str, Any]:
        async with _client(url, mine) as client:
            version = client.protocol_version
            tools = {t.name for t in (await client.list_tools()).tools}
            made = ok(
                await client.call_tool(
                    "remember", {"content": "Our wifi is 'larch'.", "type": "note", "scope": "user"}
                )
            )
            own = ok(await client.call_tool("history", {"memory_id": made["memory_id"]}))
        async with _client(url, theirs) as client:
            seen = await client.call_tool("history", {"memory_id": made["memory_id"]})
            forgot = await client.call_tool(
                "forget", {"memory_id": made["memory_id"], "reason": "not yours"}
            )
            recalled = ok(await client.call_tool("recall", {"query": "wifi password"}))
        return {
            "version": version,
            "tools": tools,
            "made": made,
            "own": own,
            "seen": seen,
            "forgot": forgot,
            "recalled": recalled,
        }

    with live_server(create_app(ApiSettings(), runtime)) as base:
        found = asyncio.run(scenario(base + "/mcp"))
    assert found["version"] == "2026-07-28"
    assert found["tools"] == TOOLS
    assert found["made"]["position"] > 0 and found["own"]["versions"][0]["content"]
    # The other tenant's token cannot see or change it, and its recall never finds it.
    assert problem(found["seen"])["type"] == problem_type("not-found")
    assert problem(found["forgot"])["type"] == problem_type("not-found")
    assert found["made"]["memory_id"] not in [i["id"] for i in found["recalled"]["items"]]


def test_no_token_no_mcp(runtime: Runtime, tenant: Tenant) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "curl", "version": "0"},
        },
    }
    revoked = f"pal_{tenant.id.hex}_{'x' * 43}"
    with live_server(create_app(ApiSettings(), runtime)) as base:
        answers = [
            httpx2.post(f"{base}/mcp", json=initialize, headers={**_JSON, **extra})
            for extra in ({}, {"Authorization": f"Bearer {revoked}"}, {"Authorization": "Basic x"})
        ]
        # With a token, a loopback service still refuses a foreign Host or Origin
        # (DNS rebinding: a web page's request is not the agent's).
        token = {"Authorization": f"Bearer {tenant.admin.token}"}
        foreign = [
            httpx2.post(f"{base}/mcp", json=initialize, headers={**_JSON, **token, **extra})
            for extra in ({"Host": "evil.example"}, {"Origin": "http://evil.example"})
        ]
    assert [f.status_code for f in foreign] == [421, 403]
    for answer in answers:
        assert answer.status_code == 401
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["type"] == problem_type("unauthenticated")
        assert answer.headers["www-authenticate"] == "Bearer"


def test_legacy_clients_negotiate(runtime: Runtime, tenant: Tenant) -> None:
    token = tenant.token("writer")
    auth = {"Authorization": f"Bearer {token}"}

    async def sdk_legacy(url: str) -> tuple[str, dict[str, Any]]:
        async with _client(url, token, mode="legacy") as client:
            made = ok(
                await client.call_tool(
                    "remember", {"content": "Legacy clients work.", "type": "note", "scope": "user"}
                )
            )
            return client.protocol_version, made

    def oldest(url: str) -> list[httpx2.Response]:
        # A 2024-11-05 client, by hand: the handshake, then calls naming its version.
        def rpc(method: str, params: dict[str, Any], version: str | None) -> httpx2.Response:
            headers = {**_JSON, **auth, **({"MCP-Protocol-Version": version} if version else {})}
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return httpx2.post(url, json=body, headers=headers)

        hello = rpc(
            "initialize",
            {
                "protocolVersion": "2024-11-05",
                "capabilities": {},
                "clientInfo": {"name": "old-agent", "version": "1"},
            },
            None,
        )
        listed = rpc("tools/list", {}, "2024-11-05")
        called = rpc(
            "tools/call",
            {
                "name": "remember",
                "arguments": {"content": "Old clients work too.", "type": "note", "scope": "user"},
            },
            "2024-11-05",
        )
        return [hello, listed, called]

    with live_server(create_app(ApiSettings(), runtime)) as base:
        version, made = asyncio.run(sdk_legacy(base + "/mcp"))
        hello, listed, called = oldest(base + "/mcp")
    assert version == "2025-11-25" and made["position"] > 0
    assert hello.status_code == 200
    assert hello.json()["result"]["protocolVersion"] == "2024-11-05"
    assert hello.json()["result"]["serverInfo"]["name"] == "palimpsest"
    assert {t["name"] for t in listed.json()["result"]["tools"]} == TOOLS
    result = called.json()["result"]
    assert result["isError"] is False and result["structuredContent"]["position"] > 0


def test_a_local_token_serves_loopback_only(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PALIMPSEST_MCP_LOCAL_TOKEN", tenant.token("reader"))
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        with pytest.raises(ConfigurationError, match="PALIMPSEST_MCP_LOCAL_TOKEN"):
            create_app(ApiSettings(host=host), runtime)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**_JSON, "MCP-Protocol-Version": "2025-11-25"}
    with live_server(create_app(ApiSettings(host="127.0.0.1"), runtime)) as base:
        bare = httpx2.post(f"{base}/mcp", json=listing, headers=headers)
        # A header that is there is still checked: no falling back to the local token.
        wrong = httpx2.post(
            f"{base}/mcp", json=listing, headers={**headers, "Authorization": "Bearer nope"}
        )
    assert bare.status_code == 200
    assert {t["name"] for t in bare.json()["result"]["tools"]} == TOOLS
    assert wrong.status_code == 401


def test_loopback_addresses() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "example.com"))
