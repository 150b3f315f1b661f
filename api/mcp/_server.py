"""The MCP server: the default tools, and the admin tools when configured; arguments
that break a tool's input schema answered as problem documents, arguments it does
not name refused, and over stdio, messages the SDK would misread refused."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, InputRequiredResult, Tool
from pydantic import ValidationError

from palimpsest.api.mcp._admin_tools import add_admin_tools
from palimpsest.api.mcp._backend import Backend, validation_result
from palimpsest.api.mcp._jsonrpc import refusal
from palimpsest.api.mcp._tools import add_core_tools

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["INSTRUCTIONS", "INVALID_PARAMS", "ProblemServer", "build_server"]

INVALID_PARAMS = -32602
"""JSON-RPC's code for a call whose arguments the method does not take."""

INSTRUCTIONS = (
    "palimpsest remembers for you, with provenance. Before answering anything the user may "
    "have told you before, recall it. Store a new claim with remember; when the user "
    "corrects or updates a claim you have the id of, revise it. remember answers the "
    "stored memories the new one may conflict with: settle each (supersedes, or both_stand) "
    "with a reason. forget what no longer holds; history shows what was believed when. "
    "Every write is durable once it answers; status pending means stored and not yet "
    "readable in recall. Pass a request_id on writes so that a retry never writes twice. "
    "Refusals are problem documents: read their detail, and branch on their type."
)


class ProblemServer(MCPServer):
    """An MCP server whose refusal of a call's arguments is a problem document, as every
    other refusal of ours is (the SDK's own is pydantic's text), and that refuses an
    argument a tool does not name, where the SDK drops it unseen (a misspelt
    ``memory_type`` would filter nothing and look like an answer)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._argument_names: dict[str, frozenset[str]] | None = None

    async def list_tools(self) -> list[Tool]:
        """List the tools, each input schema closed (``additionalProperties: false``), as
        :meth:`call_tool` holds calls to it."""
        return [
            tool.model_copy(
                update={"input_schema": {**tool.input_schema, "additionalProperties": False}}
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments its input schema refuses answer ``validation-error``.

        Raises:
            MCPError: ``-32602`` (invalid params), naming the arguments the tool does
                not take; the tool never runs.
            ToolError: the tool is unknown, or raised one itself.
        """
        if self._argument_names is None:  # every tool is added before the first call
            self._argument_names = {
                tool.name: frozenset(tool.input_schema.get("properties", {}))
                for tool in await super().list_tools()
            }
        known = self._argument_names.get(name)
        if known is not None and (unknown := sorted(set(arguments) - known)):
            msg = (
                f"{name} takes no argument named {', '.join(unknown)} "
                f"(it takes: {', '.join(sorted(known))})"
            )
            raise MCPError(INVALID_PARAMS, msg, {"unknown_arguments": unknown})
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            # The SDK raises its ToolError "from" the ValidationError of the arguments
            # (its documented contract: tests/api/mcp/test_tools.py holds it to it).
            if isinstance(e.__cause__, ValidationError):
                return validation_result(e.__cause__)
            raise

    async def run_stdio_async(self) -> None:
        """Serve over stdin and stdout, as the SDK does, but answer a line the SDK would
        misread (:mod:`palimpsest.api.mcp._jsonrpc`) with its JSON-RPC error."""
        replies: list[MemoryObjectSendStream[SessionMessage]] = []
        ready = anyio.Event()
        stdin = anyio.wrap_file(sys.stdin.buffer)

        async def lines() -> AsyncIterator[str]:
            async for line in stdin:
                refused = refusal(line) if line.strip() else None
                if refused is None:
                    yield line.decode("utf-8")
                    continue
                await ready.wait()  # the reader starts before the streams are handed out
                await replies[0].send(SessionMessage(refused))

        async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines())) as (reads, writes):
            replies.append(writes)
            ready.set()
            await self._lowlevel_server.run(
                reads, writes, self._lowlevel_server.create_initialization_options()
            )


def build_server(backend: Backend, *, admin_tools: bool = False) -> MCPServer:
    """Return an MCP server over ``backend``: the default tools, and with
    ``admin_tools`` the administrative ones (pin, unpin, restore, erase, retention,
    proposals)."""
    server: MCPServer = ProblemServer(
        "palimpsest",
        title="palimpsest",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        log_level="WARNING",
    )
    add_core_tools(server, backend)
    if admin_tools:
        add_admin_tools(server, backend)
    return server
