"""Messages the SDK would misread (an id of ``1.5``), arguments a tool does not name,
and bodies that are not strict JSON: refused with JSON-RPC errors, over HTTP and
stdio, and the tool never runs."""

from __future__ import annotations

import json
import os
import select
import subprocess
from typing import Any

import httpx2
import pytest

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.api.mcp.test_stdio import COMMAND, ROOT, mcp_env
from tests.conftest import Tenant

__all__ = ["mcp_env"]  # the stdio test's fixture, shared

_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-11-25",
}
_REMEMBER = {"content": "The tool ran.", "type": "note", "scope": "user"}


def _call(request_id: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": arguments},
    }


def _memories(base: str, tenant: Tenant) -> list[Any]:
    listed = httpx2.get(f"{base}/v1/memories", headers=tenant.headers())
    assert listed.status_code == 200, listed.text
    items: list[Any] = listed.json()["items"]
    return items


@pytest.mark.parametrize("request_id", [1.5, True, None, {"n": 1}])
def test_a_request_id_mcp_does_not_allow_is_refused_over_http(
    runtime: Runtime, tenant: Tenant, request_id: Any
) -> None:
    headers = {**_HEADERS, "Authorization": f"Bearer {tenant.token('writer')}"}
    with live_server(create_app(ApiSettings(), runtime)) as base:
        answer = httpx2.post(f"{base}/mcp", json=_call(request_id, _REMEMBER), headers=headers)
        memories = _memories(base, tenant)
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == -32600
    assert answer.json()["id"] is None
    assert memories == []  # the tool never ran


def test_unknown_arguments_and_loose_json_are_refused_over_http(
    runtime: Runtime, tenant: Tenant
) -> None:
    headers = {**_HEADERS, "Authorization": f"Bearer {tenant.token('writer')}"}
    misspelt = _call(7, {**_REMEMBER, "memory_typ": "fact"})
    twice = b'{"jsonrpc": "2.0", "id": 8, "id": 9, "method": "tools/list"}'
    with live_server(create_app(ApiSettings(), runtime)) as base:
        unknown = httpx2.post(f"{base}/mcp", json=misspelt, headers=headers)
        duplicated = httpx2.post(f"{base}/mcp", content=twice, headers=headers)
        listed = httpx2.post(
            f"{base}/mcp",
            json={"jsonrpc": "2.0", "id": 10, "method": "tools/list"},
            headers=headers,
        )
        memories = _memories(base, tenant)
    assert unknown.json()["error"]["code"] == -32602
    assert unknown.json()["id"] == 7
    assert unknown.json()["error"]["data"]["unknown_arguments"] == ["memory_typ"]
    assert duplicated.status_code == 400 and duplicated.json()["error"]["code"] == -32700
    assert memories == []
    # The schema a client reads says what the call enforces.
    schemas = [t["inputSchema"] for t in listed.json()["result"]["tools"]]
    assert all(s["additionalProperties"] is False for s in schemas)


@pytest.mark.slow
def test_stdio_answers_both_with_json_rpc_errors(mcp_env: dict[str, str], tenant: Tenant) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    process = subprocess.Popen(
        COMMAND,
        env={**environment, **mcp_env, "PALIMPSEST_TOKEN": tenant.token("writer")},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        # An answer that never comes must fail the test, not hang it.
        answered, _, _ = select.select([process.stdout], [], [], 60)
        assert answered, f"no answer to {message}"
        found: dict[str, Any] = json.loads(process.stdout.readline())
        return found

    try:
        ask(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "agent", "version": "1"},
                },
            }
        )
        process.stdin.write(
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"
        )
        fractional = ask(_call(1.5, _REMEMBER))
        unknown = ask(_call(3, {**_REMEMBER, "tags": ["x"]}))
        listed = ask(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "list", "arguments": {}},
            }
        )
        process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert fractional["error"]["code"] == -32600 and fractional["id"] is None
    assert unknown["error"]["code"] == -32602 and unknown["id"] == 3
    assert listed["result"]["structuredContent"]["items"] == []  # neither call wrote
