"""An agent's session over real MCP, as a model would run it (issue 44): it remembers a
preference, then a changed one, is told of the conflict in remember's answer, and
either settles it (then recalls only the new preference) or leaves it (then both are
recalled, the older one marked). Over streamable HTTP (``/mcp`` on a live server with
the drains running, as ``serve`` runs them) and over stdio (``palimpsest mcp``, a real
process with the real embedding model, as a desktop client starts it)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.testclient import TestClient
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import Runtime
from tests.api.live_server import live_server
from tests.api.mcp.helpers import ok
from tests.conftest import RunDatabase, Tenant

ROOT = Path(__file__).resolve().parents[3]
SETTLE_WITHIN_S = 60.0
"""How long the drains may take to make a write readable (a first indexing in a new
process loads the embedding model); the scenarios poll, they assert no timing."""

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]

THEME = {"query": "Which mode does the user prefer?"}
"""Its words (mode, prefer) are in both memories: found by meaning and by words."""


async def _until(call: Call, query: dict[str, Any], done: Callable[[dict[str, Any]], bool]) -> Any:
    """Recall ``query`` until ``done`` holds for the answer (an agent reading its own
    writes); return that answer."""
    deadline = time.monotonic() + SETTLE_WITHIN_S
    while True:
        answer = await call("recall", query)
        if done(answer) or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.2)


def _ids(answer: dict[str, Any]) -> list[str]:
    return [i["id"] for i in answer["items"] if i["status"] == "current"]


async def _prefers(call: Call, scope: str, content: str) -> dict[str, Any]:
    return await call("remember", {"content": content, "type": "preference", "scope": scope})


async def _told_of_the_conflict(call: Call, scope: str) -> tuple[str, dict[str, Any]]:
    """Remember a preference, wait until it is readable, then a changed one: return the
    first's id and the second's answer."""
    old = await _prefers(call, scope, "Prefers dark mode")
    query = {"query": "dark mode", "scope": scope}
    await _until(call, query, lambda a: old["memory_id"] in _ids(a))
    new = await _prefers(call, scope, "Now prefers light mode")
    return old["memory_id"], new


async def _session(call: Call) -> dict[str, Any]:
    """Both scenarios, each in a scope of its own."""
    seen: dict[str, Any] = {}
    theme = THEME

    # Settled: the new preference supersedes the old one.
    old, new = await _told_of_the_conflict(call, "settles")
    seen["settled_told"] = (old, new)
    seen["settle"] = await call(
        "settle",
        {
            "memory_id": new["memory_id"],
            "other_id": old,
            "resolution": "supersedes",
            "reason": "the user said they switched to light mode",
        },
    )
    query = {**theme, "scope": "settles"}
    seen["settled_recall"] = await _until(
        call, query, lambda a: old not in _ids(a) and new["memory_id"] in _ids(a)
    )

    # Not settled: both stand in recall, the older one marked.
    old, new = await _told_of_the_conflict(call, "leaves")
    seen["left_told"] = (old, new)
    query = {**theme, "scope": "leaves"}
    seen["left_recall"] = await _until(
        call, query, lambda a: {old, new["memory_id"]} <= set(_ids(a))
    )
    return seen


def _check(seen: dict[str, Any]) -> None:
    for told in ("settled_told", "left_told"):
        old, new = seen[told]
        # Told of the conflict in remember's answer, with the old text to judge by.
        assert new["conflicts_status"] == "ready", new
        [conflict] = new["potential_conflicts"]
        assert conflict["memory_id"] == old and conflict["content"] == "Prefers dark mode"
        assert conflict["type"] == "preference" and 0.5 <= conflict["similarity"] <= 1
        assert "settle" in new["next_step"]

    old, new = seen["settled_told"]
    settled = seen["settle"]
    assert settled["resolution"] == "supersedes" and settled["edge_id"] is not None
    assert _ids(seen["settled_recall"]) == [new["memory_id"]]  # only the new preference
    assert seen["settled_recall"]["caught_up"] is True  # the agent's writes were searched

    old, new = seen["left_told"]
    left = {i["id"]: i for i in seen["left_recall"]["items"]}
    assert set(left) == {old, new["memory_id"]}
    # The older one is marked as possibly superseded by the newer (recall's marking),
    # and ranks below it, whatever their similarity to the question.
    assert left[old]["possibly_superseded_by"] == [new["memory_id"]]
    assert left[new["memory_id"]]["possibly_superseded_by"] == []
    assert _ids(seen["left_recall"]) == [new["memory_id"], old]
    assert seen["left_recall"]["caught_up"] is True


def _same_as_http(seen: dict[str, Any], http: TestClient | httpx.Client, token: str) -> None:
    """The HTTP API's recall of the same question answers the same memories, marks and
    order as the MCP recall did (one search, one marking, whichever door)."""
    answer = http.post(
        "/v1/recall",
        json={**THEME, "scope": "leaves"},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.text
    over_http = [(i["id"], i["possibly_superseded_by"]) for i in answer.json()["items"]]
    over_mcp = [(i["id"], i["possibly_superseded_by"]) for i in seen["left_recall"]["items"]]
    assert [(i, [str(n) for n in m]) for i, m in over_http] == over_mcp


@asynccontextmanager
async def _over_http(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def _caller(client: Client) -> Call:
    async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return ok(await client.call_tool(tool, arguments))

    return call


def test_an_agent_settles_a_conflict_over_http(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a service with its drains running (as serve runs them), whose remember may
    # wait long enough on this shared machine: it answers as soon as they are ready.
    monkeypatch.setenv("PALIMPSEST_MCP_CONFLICT_WAIT_S", "30")
    token = tenant.token("writer")
    drains = DrainLoop(runtime.log, sweep_s=0.5, embedder=runtime.embedder)
    drains.start()

    async def scenario(url: str) -> dict[str, Any]:
        async with _over_http(url, token) as client:
            return await _session(_caller(client))

    try:
        app = create_app(ApiSettings(), runtime, wake=drains.wake)
        with live_server(app) as base:
            seen = asyncio.run(scenario(base + "/mcp"))
            with httpx.Client(base_url=base) as http:
                _same_as_http(seen, http, token)
    finally:
        drains.stop()
    _check(seen)


@pytest.mark.slow
def test_an_agent_settles_a_conflict_over_stdio(
    test_database: RunDatabase, tenant: Tenant, client: TestClient
) -> None:
    # Given `palimpsest mcp` as a desktop client starts it, with the real model: its
    # own drains embed what it remembers.
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "palimpsest.api.cli", "mcp"],
        env={
            **test_database.env,
            "PALIMPSEST_TOKEN": tenant.token("writer"),
            "PALIMPSEST_MCP_CONFLICT_WAIT_S": "30",
        },
        cwd=ROOT,
    )

    async def scenario() -> dict[str, Any]:
        async with Client(params) as agent:
            return await _session(_caller(agent))

    seen = asyncio.run(scenario())
    _check(seen)
    _same_as_http(seen, client, tenant.token("writer"))


CAT_THEN = (
    "I've had Luna for about 6 months now, and I've been meaning to get her microchipped "
    "for a while. I've heard horror stories about pets getting lost, and I don't want to "
    "take any chances. I've already scheduled an appointment for next Friday to get it done."
)
CAT_NOW = (
    "I've had my cat, Luna, for about 9 months now, and I've been trying to keep her active "
    "and engaged. I've set up her cat tree, and she loves climbing up and down it. I've also "
    "been rotating her toys every week to keep things fresh for her. Do you think the "
    "interactive toys you recommended would be a good addition to her playtime routine?"
)
"""An update of the knowledge-updates development split: the new statement replaces the
old one's months, yet the two are 0.37 similar, below the conflict floor (long turns
dilute their similarity)."""


def test_an_agent_is_told_of_an_update_below_the_conflict_floor(
    runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a service with its drains running, and the agent's first statement readable
    monkeypatch.setenv("PALIMPSEST_MCP_CONFLICT_WAIT_S", "30")
    token = tenant.token("writer")
    drains = DrainLoop(runtime.log, sweep_s=0.5, embedder=runtime.embedder)
    drains.start()

    async def scenario(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        async with _over_http(url, token) as client:
            call = _caller(client)
            old = await call("remember", {"content": CAT_THEN, "type": "fact", "scope": "cat"})
            query = {"query": "Luna", "scope": "cat"}
            await _until(call, query, lambda a: old["memory_id"] in _ids(a))
            # When it remembers the update
            new = await call("remember", {"content": CAT_NOW, "type": "fact", "scope": "cat"})
            return old, new

    try:
        app = create_app(ApiSettings(), runtime, wake=drains.wake)
        with live_server(app) as base:
            old, new = asyncio.run(scenario(base + "/mcp"))
    finally:
        drains.stop()

    # Then remember puts the old statement to it, though it is below the floor
    assert new["conflicts_status"] == "ready", new
    [conflict] = new["potential_conflicts"]
    assert conflict["memory_id"] == old["memory_id"] and conflict["content"] == CAT_THEN
    assert conflict["similarity"] < runtime.embedding.conflict_floor
    assert "settle" in new["next_step"]
