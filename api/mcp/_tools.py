"""The tools every agent gets: remember, recall, revise, settle, list, forget and
history.

Few on purpose: an advertised tool costs every conversation context. Each
builds the HTTP API's request model from its arguments (the same rules refuse
the same values, and the defaults are the HTTP API's), turns it into the same
write spec (:mod:`palimpsest.api._specs`) or calls the same view, and answers an
explicit model (:mod:`palimpsest.api.mcp._models`). Descriptions are written for
the model that reads them: when to use the tool, and what to do with its answer.
The writes are in :mod:`palimpsest.api.mcp._write_tools`, the reads in
:mod:`palimpsest.api.mcp._read_tools`.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._read_tools import add_read_tools
from palimpsest.api.mcp._write_tools import add_write_tools

__all__ = ["add_core_tools"]


def add_core_tools(server: MCPServer, backend: Backend) -> None:
    """Register the default tools on ``server``: the writes, then the reads."""
    add_write_tools(server, backend)
    add_read_tools(server, backend)
