"""``palimpsest mcp`` as a desktop client starts it: a real process, talking over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from palimpsest.api.cli import EXIT_USAGE, main
from tests.api.mcp.helpers import TOOLS, ok, problem_type
from tests.conftest import RunDatabase, Tenant

ROOT = Path(__file__).resolve().parents[3]
COMMAND = [sys.executable, "-m", "palimpsest.api.cli", "mcp"]


@pytest.fixture
def mcp_env(test_database: RunDatabase) -> dict[str, str]:
    """The store's settings, and an embedder that never loads a model (the drains'
    indexing fails quietly on stderr; revision still runs)."""
    return {
        **test_database.env,
        "PALIMPSEST_EMBEDDER": "http",
        "PALIMPSEST_EMBEDDING_URL": "http://127.0.0.1:9",
        "PALIMPSEST_EMBEDDING_MODEL": "unreachable",
    }


@pytest.mark.slow
def test_the_sdk_client_talks_to_it(mcp_env: dict[str, str], tenant: Tenant) -> None:
    params = StdioServerParameters(
        command=COMMAND[0],
        args=COMMAND[1:],
        env={**mcp_env, "PALIMPSEST_TOKEN": tenant.token("writer")},
        cwd=ROOT,
    )

    async def scenario() -> dict[str, Any]:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            made = ok(
                await client.call_tool(
                    "remember", {"content": "stdio works.", "type": "note", "scope": "user"}
                )
            )
            told = ok(await client.call_tool("history", {"memory_id": made["memory_id"]}))
            refused = await client.call_tool("forget", {"memory_id": made["memory_id"]})
            return {"tools": tools, "made": made, "told": told, "refused": refused}

    found = asyncio.run(scenario())
    assert found["tools"] == TOOLS
    assert found["made"]["position"] > 0
    assert found["told"]["versions"][0]["content"] == "stdio works."
    assert found["refused"].is_error  # the reason is required


@pytest.mark.slow
def test_stdout_carries_the_protocol_and_nothing_else(
    mcp_env: dict[str, str], tenant: Tenant
) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    process = subprocess.Popen(
        COMMAND,
        env={**environment, **mcp_env, "PALIMPSEST_TOKEN": tenant.token("reader")},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    def answer() -> dict[str, Any]:
        assert process.stdout is not None
        line = process.stdout.readline()
        found: dict[str, Any] = json.loads(line)
        return found

    try:
        # An initialize-era client of the oldest protocol revision.
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {},
                    "clientInfo": {"name": "old-agent", "version": "1"},
                },
            }
        )
        hello = answer()
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/list"})
        listed = answer()
        send(
            {
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "remember",
                    "arguments": {"content": "Readers cannot.", "type": "note", "scope": "user"},
                },
            }
        )
        called = answer()
        rest, errors = process.communicate(timeout=60)  # closes stdin: the client leaves
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert hello["result"]["protocolVersion"] == "2024-11-05"
    assert {t["name"] for t in listed["result"]["tools"]} == TOOLS
    assert called["result"]["isError"] is True
    assert problem_from(called["result"])["type"] == problem_type("forbidden")
    assert rest == ""  # nothing after the last answer: no log line, no banner
    assert process.returncode == 0, errors


def problem_from(result: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(result["content"][0]["text"])
    return found


def test_refuses_to_start_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PALIMPSEST_TOKEN", raising=False)
    assert main(["mcp"]) == EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == "" and "PALIMPSEST_TOKEN" in err
