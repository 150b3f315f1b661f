"""The places people and programs meet palimpsest: HTTP (FastAPI) and the
``palimpsest`` command line.

Modules:

- :mod:`palimpsest.api._admission`: Caps on what a token and a tenant may hold open at once:
  event streams and waits.
- :mod:`palimpsest.api.app`: The FastAPI application factory.
- :mod:`palimpsest.api._candidate_budget`: A serving process's budget for a write's
  contradiction candidates, spent only while it pays.
- :mod:`palimpsest.api.cli`: The ``palimpsest`` command line.
- :mod:`palimpsest.api.client`: The Python client of the HTTP API: ``Client`` and
  ``AsyncClient``, and a LangGraph store over them.
- :mod:`palimpsest.api._cursor`: Opaque pagination cursors: a listing's
  :class:`ListingCursor`, base64url-encoded.
- :mod:`palimpsest.api._deps`: Dependencies shared by the routers: the runtime, the caller,
  its role, writes.
- :mod:`palimpsest.api._edge`: The one ASGI middleware of ours around every request: the
  response headers, the request metrics and size cap, the strict JSON body and the
  announced writes, each from its own module.
- :mod:`palimpsest.api._headers`: Headers every response carries, whatever route or error
  produced it.
- :mod:`palimpsest.api._json_bodies`: Every JSON request body parsed strictly before a
  route reads it.
- :mod:`palimpsest.api._logformat`: Structured logs: one JSON object per line.
- :mod:`palimpsest.api.mcp`: The MCP server: the tools for agents, at ``/mcp`` and over
  stdio.
- :mod:`palimpsest.api._metrics`: Prometheus metrics of one app instance, and how a
  request is recorded in them.
- :mod:`palimpsest.api._plain_requests`: Plain requests answered without FastAPI's
  dependency solving.
- :mod:`palimpsest.api._problems`: RFC 9457 problem details: one mapping from error class
  to type and status.
- :mod:`palimpsest.api._query_params`: Unknown query parameters: refused with 400
  problem+json, never ignored.
- :mod:`palimpsest.api.routers`:
- :mod:`palimpsest.api.schemas`: Typed request and response bodies of the HTTP API, one
  module per resource.
- :mod:`palimpsest.api._sessions`: Browser sessions of the review page: signing in with a
  token, and CSRF tokens.
- :mod:`palimpsest.api._settings`: HTTP and write-path settings of the service.
- :mod:`palimpsest.api._specs`: Translation of validated request bodies into write specs.
- :mod:`palimpsest.api._strict_json`: Request bodies as JSON: one strict parser, for
  every route and for ``/mcp``.
- :mod:`palimpsest.api._waiting`: Waiting for the drains, and for new events, from async
  routes, holding no thread while waiting.
- :mod:`palimpsest.api._worker_threads`: The hop from the event loop to a worker thread, for
  every blocking call of ``api/``.
"""

from __future__ import annotations

__all__ = [
    "app",
    "cli",
    "client",
    "mcp",
    "routers",
    "schemas",
]
