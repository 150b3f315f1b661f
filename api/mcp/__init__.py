"""The MCP server: palimpsest's tools for agents, over streamable HTTP at ``/mcp`` and
over stdio (``palimpsest mcp``, :mod:`palimpsest.api.cli.mcp_stdio`; see docs/agents.md).

Modules:

- :mod:`palimpsest.api.mcp.admin_tools`: The administrative tools, behind
  ``PALIMPSEST_MCP_ADMIN_TOOLS``.
- :mod:`palimpsest.api.mcp.backend`: The caller (never a tool argument), the one write path,
  and tool results and errors.
- :mod:`palimpsest.api.mcp.http`: ``/mcp`` on the service's app, authenticated by bearer token.
- :mod:`palimpsest.api.mcp.models`: What the tools answer: explicit models, each tool's
  ``outputSchema``.
- :mod:`palimpsest.api.mcp.server`: The MCP server: the default tools, and the admin tools
  when configured.
- :mod:`palimpsest.api.mcp.settings`: MCP settings (``PALIMPSEST_MCP_*``).
- :mod:`palimpsest.api.mcp.tools`: The five default tools: remember, recall, revise, forget,
  history.
"""

from __future__ import annotations

__all__ = [
    "admin_tools",
    "backend",
    "http",
    "models",
    "server",
    "settings",
    "tools",
]
