"""The MCP server: the default tools, and the admin tools when configured; arguments
that break a tool's input schema answered as problem documents."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

from palimpsest.api.mcp.admin_tools import add_admin_tools
from palimpsest.api.mcp.backend import Backend, validation_result
from palimpsest.api.mcp.tools import add_core_tools

__all__ = ["INSTRUCTIONS", "ProblemServer", "build_server"]

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
    other refusal of ours is (the SDK's own is pydantic's text)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments its input schema refuses answer ``validation-error``.

        Raises:
            ToolError: the tool is unknown, or raised one itself.
        """
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as e:
            # The SDK raises its ToolError "from" the ValidationError of the arguments
            # (its documented contract: tests/api/mcp/test_tools.py holds it to it).
            if isinstance(e.__cause__, ValidationError):
                return validation_result(e.__cause__)
            raise


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
