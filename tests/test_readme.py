"""The README's ways to connect an agent, each run as written against a real server:
the desktop MCP config starts ``palimpsest mcp`` as the client would, the HTTP MCP
config reaches ``/mcp`` with its header, and the Python client and LangGraph blocks
are executed with only the address and the token filled in. A README that drifts from
the code (a renamed tool, argument, method or import) fails here."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.runtime import Runtime, start_runtime
from tests.api.client.conftest import served_with_drains
from tests.api.mcp.helpers import ok
from tests.conftest import RunDatabase, Tenant, fresh_database, index_until_caught_up

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PLACEHOLDER = "pal_…"


def _block(after: str, language: str) -> str:
    """The first fenced ``language`` block after the text ``after``."""
    tail = README.split(after, 1)[1]
    return tail.split(f"```{language}\n", 1)[1].split("```", 1)[0]


@pytest.fixture(scope="module")
def url(runtime: Runtime) -> Iterator[str]:
    # The session's store holds every earlier test's memories: index them first, so
    # that the drains serve these blocks' writes within recall's bound, as on a
    # store of one's own.
    index_until_caught_up(runtime)
    with served_with_drains(runtime) as base:
        yield base


async def _remember_then_recall(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    made = ok(
        await client.call_tool(
            "remember",
            {"content": "Prefers tea over coffee", "type": "preference", "scope": "user"},
        )
    )
    found = ok(await client.call_tool("recall", {"query": "tea or coffee?", "scope": "user"}))
    return made, found


@pytest.fixture
def own_store(
    runtime: Runtime, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunDatabase, Tenant]]:
    """A store of its own, as a desktop user's is: the session's shared store holds
    what earlier tests left for the drains, which a new server's drains meet first
    (a recall waits for its caller's writes 5 s at most)."""
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        own.use_embedder(runtime.embedder)
        try:
            yield database, Tenant(own, create_tenant(own.log, "desktop"))
        finally:
            own.close()


@pytest.mark.slow
def test_the_desktop_mcp_config_starts_a_server_that_remembers_and_recalls(
    own_store: tuple[RunDatabase, Tenant],
) -> None:
    test_database, tenant = own_store
    config = json.loads(_block("**MCP, a desktop client**", "json"))["mcpServers"]["palimpsest"]
    # The one thing a user replaces: where their virtualenv's script is
    assert config["command"].endswith("/.venv/bin/palimpsest")
    command = str(Path(sys.executable).parent / "palimpsest")
    env = {k: (tenant.token("writer") if v == PLACEHOLDER else v) for k, v in config["env"].items()}
    params = StdioServerParameters(
        command=command, args=config["args"], env={**test_database.env, **env}, cwd=ROOT
    )

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        async with Client(params) as client:
            return await _remember_then_recall(client)

    made, found = asyncio.run(run())
    assert [item["id"] for item in found["items"]] == [made["memory_id"]]


@pytest.mark.slow  # a served process or two models loaded: 14 to 19 s
def test_the_http_mcp_config_reaches_the_running_service(url: str, tenant: Tenant) -> None:
    config = json.loads(_block("**MCP over HTTP**", "json"))["mcpServers"]["palimpsest"]
    assert config["type"] == "http"
    endpoint = config["url"].replace("http://127.0.0.1:8080", url)
    token = tenant.token("writer")
    headers = {k: v.replace(PLACEHOLDER, token) for k, v in config["headers"].items()}

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(endpoint, http_client=http)) as client,
        ):
            return await _remember_then_recall(client)

    made, found = asyncio.run(run())
    assert [item["id"] for item in found["items"]] == [made["memory_id"]]


def _run_block(block: str, url: str, tenant: Tenant, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.token("writer"))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(block.replace("http://127.0.0.1:8080", url), {})
    return printed.getvalue().splitlines()


def test_the_python_client_block_reads_and_recalls_what_it_wrote(
    url: str, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    belief, recalled = _run_block(
        _block("**The Python client**", "python"), url, tenant, monkeypatch
    )
    assert belief == "Prefers dark mode"
    assert recalled.startswith("[('current', UUID(")  # recall found what it just wrote


def test_the_langgraph_block_puts_gets_and_finds(
    url: str, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    value, keys = _run_block(_block("**The LangGraph store**", "python"), url, tenant, monkeypatch)
    assert value == "{'food': 'Alice loves sushi'}"
    assert keys == "['food']"


def _verbs(*words: str) -> list[str]:
    """The verbs ``palimpsest *words --help`` offers (its ``{a,b,…}`` choices)."""
    shown = subprocess.run(
        [sys.executable, "-m", "palimpsest", *words, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    choices = re.search(r"\{([a-z,-]+)\}\s+\.\.\.", shown)
    return choices.group(1).split(",") if choices else []


def test_the_command_table_lists_every_verb() -> None:
    table = README.split("## Commands", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"^\| `palimpsest ([a-z-]+(?: [a-z]+)?)", table, flags=re.MULTILINE))
    expected = set()
    for verb in _verbs():
        nested = _verbs(verb)
        expected |= {f"{verb} {sub}" for sub in nested} if nested else {verb}
    missing = {v for v in expected if v not in listed and v.split()[0] not in listed}
    assert not missing, f"the README's command table lacks {sorted(missing)}"
