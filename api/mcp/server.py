"""The MCP server: the default tools, and the admin tools when configured."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from palimpsest.api.mcp.admin_tools import add_admin_tools
from palimpsest.api.mcp.backend import Backend
from palimpsest.api.mcp.tools import add_core_tools

__all__ = ["INSTRUCTIONS", "build_server"]

INSTRUCTIONS = (
    "palimpsest remembers for you, with provenance. `remember` a claim (with the text it "
    "comes from, when you have it), `recall` before you answer, `revise` what changed, "
    "`forget` what no longer holds (reversible), and ask `history` what was believed when. "
    "Every write answers its durable id and log position; `pending` means accepted and not "
    "yet current."
)


def build_server(backend: Backend, *, admin_tools: bool = False) -> MCPServer:
    """Return an MCP server over ``backend``: the five default tools, and with
    ``admin_tools`` the administrative ones (pin, unpin, restore, erase, retention,
    proposals)."""
    server: MCPServer = MCPServer(
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
