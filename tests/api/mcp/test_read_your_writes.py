"""An agent recalls what it just remembered, over real MCP (issue 44, item 3): the
server notes the position of every write a caller makes through the tools, and the
caller's next ``recall`` waits, bounded, until those writes are indexed. Over
streamable HTTP (``/mcp`` on a live server whose drains run as ``palimpsest serve``
runs them, with the real embedding model)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from palimpsest.api.mcp._own_writes import WrittenPositions
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.runtime import Runtime
from tests.api.client.conftest import served_with_drains
from tests.api.mcp.helpers import ok
from tests.conftest import Tenant


@pytest.fixture(scope="module")
def mcp_url(runtime: Runtime) -> Iterator[str]:
    with served_with_drains(runtime) as url:
        yield url + "/mcp"


def _session(url: str, token: str, scenario: Callable[..., Awaitable[Any]]) -> Any:
    """Run ``scenario(call)`` in one MCP session over streamable HTTP as ``token``."""

    async def run() -> Any:
        async with (
            create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):

            async def call(tool: str, **arguments: Any) -> dict[str, Any]:
                return ok(await client.call_tool(tool, arguments))

            return await scenario(call)

    return asyncio.run(run())


def _first(found: dict[str, Any]) -> tuple[Any, ...]:
    first = found["items"][0]
    return first["id"], first["status"], first["content"]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_a_recall_right_after_remember_finds_it(mcp_url: str, tenant: Tenant, mode: str) -> None:
    # A note: remember does not wait for its conflicts, so nothing but recall waits
    content = f"The {mode} gate code for the allotment is written inside the shed door"

    async def scenario(call: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
        remembered = await call("remember", content=content, type="note", scope="user")
        return remembered, await call("recall", query=content, mode=mode)

    remembered, found = _session(mcp_url, tenant.token("writer"), scenario)
    assert _first(found) == (remembered["memory_id"], "current", content)


def test_a_recall_right_after_revise_finds_the_new_text(mcp_url: str, tenant: Tenant) -> None:
    async def scenario(call: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
        old = await call("remember", content="The bins go out on Monday", type="note", scope="u")
        await call("recall", query="bins")
        await call("revise", memory_id=old["memory_id"], content="The bins go out on Thursday")
        return old, await call("recall", query="The bins go out on Thursday", mode="vector")

    old, found = _session(mcp_url, tenant.token("writer"), scenario)
    assert _first(found) == (old["memory_id"], "current", "The bins go out on Thursday")


def _caller(tenant_id: uuid.UUID, principal_id: uuid.UUID) -> Caller:
    return Caller(tenant_id, principal_id, "agent", "writer")


def test_each_principal_s_highest_write_is_kept_for_the_most_recent_writers() -> None:
    positions = WrittenPositions(max_writers=2)
    tenant = uuid.uuid4()
    ana, bob, cy = (_caller(tenant, uuid.uuid4()) for _ in range(3))
    positions.note(ana, 9)
    positions.note(ana, 7)  # answered after a later write: the higher one stays
    positions.note(bob, 8)
    assert (positions.of(ana), positions.of(bob), positions.of(cy)) == (9, 8, None)
    # Another tenant's principal of the same id is another writer
    assert positions.of(_caller(uuid.uuid4(), ana.principal_id)) is None
    # Past the bound, the writer that wrote least recently is forgotten
    positions.note(ana, 10)
    positions.note(cy, 11)
    assert (positions.of(ana), positions.of(bob), positions.of(cy)) == (10, None, 11)
