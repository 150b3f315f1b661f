"""The MCP server: palimpsest's tools for agents, over streamable HTTP at ``/mcp`` and
over stdio (``palimpsest mcp``, :mod:`palimpsest.api.cli._mcp_stdio`; see docs/agents.md).

Modules:

- :mod:`palimpsest.api.mcp._admin_tools`: The administrative tools, behind
  ``PALIMPSEST_MCP_ADMIN_TOOLS``.
- :mod:`palimpsest.api.mcp._arguments`: What the tools share: the types of their common
  arguments, their descriptions' form, and a decision's answer.
- :mod:`palimpsest.api.mcp._backend`: The caller (never a tool argument), the one write path,
  request ids, and tool results and errors.
- :mod:`palimpsest.api.mcp._conflicts`: What ``remember`` tells the agent about the memories
  its new one may conflict with.
- :mod:`palimpsest.api.mcp._http`: ``/mcp`` on the service's app, authenticated by bearer token.
- :mod:`palimpsest.api.mcp._jsonrpc`: JSON-RPC messages the SDK would misread, refused
  with JSON-RPC errors, over HTTP and stdio alike.
- :mod:`palimpsest.api.mcp._models`: What the tools answer: explicit models, each tool's
  ``outputSchema``.
- :mod:`palimpsest.api.mcp._own_writes`: Read your writes over MCP: ``recall`` waits until
  the caller's own writes are indexed, without the agent passing anything.
- :mod:`palimpsest.api.mcp._read_tools`: The read tools: recall, list and history.
- :mod:`palimpsest.api.mcp._server`: The MCP server: the default tools, the admin tools
  when configured, and schema violations as problem documents.
- :mod:`palimpsest.api.mcp._settings`: MCP settings (``PALIMPSEST_MCP_*``).
- :mod:`palimpsest.api.mcp._tools`: The default tools: remember, recall, revise, settle,
  list, forget and history.
- :mod:`palimpsest.api.mcp._write_tools`: The write tools: remember, revise, settle and
  forget.
"""

from __future__ import annotations

__all__ = []
