"""``/mcp``: the MCP server over streamable HTTP, on the service's own app.

Every request is authenticated before the MCP server reads it, with the bearer
token and the same rules as the HTTP API (:func:`palimpsest.api._deps.get_any_caller`); a
request without a valid token is refused with a problem document (401, or 410
for a deleted tenant) and never reaches a tool. There is no unauthenticated
mode on any address but loopback: there, ``PALIMPSEST_MCP_LOCAL_TOKEN`` may name
the token that requests without an ``Authorization`` header act as (for local
clients that cannot send one), and ``create_app`` refuses it for any other bind
address.

The transport is stateless with JSON responses: no tool calls back into the
client, so no session is kept, and any process of a deployment can answer any
request (both protocol eras: 2026-07-28 clients, and ``initialize``-handshake
clients up to 2025-11-25). A body is parsed strictly before the transport reads
it, and one the SDK would misread (a request id of ``1.5``) is answered with a
JSON-RPC error (:mod:`palimpsest.api.mcp._jsonrpc`). On a loopback address the SDK's
DNS-rebinding guard admits only loopback ``Host`` headers; on any other address
the token is the guard, and the proxy in front decides which names reach the
service.
"""

from __future__ import annotations

import ipaddress
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from palimpsest.api._deps import get_any_caller, get_caller
from palimpsest.api._problems import problem_of, problem_response
from palimpsest.api.mcp._backend import CALLER_STATE, Backend
from palimpsest.api.mcp._jsonrpc import refusal
from palimpsest.api.mcp._server import build_server
from palimpsest.api.mcp._settings import McpSettings
from palimpsest.domain.errors import ConfigurationError, PalimpsestError
from palimpsest.projections.commands.caller import Caller

__all__ = ["MCP_PATH", "McpEndpoint", "is_loopback", "mount_mcp"]

MCP_PATH = "/mcp"

_bearer = HTTPBearer(auto_error=False)
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def is_loopback(host: str) -> bool:
    """Return whether ``host`` (a bind address or a name) is only reachable from here."""
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _transport_security(host: str) -> TransportSecuritySettings:
    if is_loopback(host):
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: authenticates, then hands the request to the
    MCP server's transport (started by :meth:`running`, in the app's lifespan)."""

    def __init__(
        self, server: MCPServer, backend: Backend, host: str, local_token: str | None = None
    ) -> None:
        self._server = server
        self._backend = backend
        self._local = (
            None
            if local_token is None
            else HTTPAuthorizationCredentials(scheme="Bearer", credentials=local_token)
        )
        self._security = _transport_security(host)
        self._transport: ASGIApp | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the transport's session manager (a new one each time the app starts:
        one manager runs once)."""
        transport = self._server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=self._security,
        )
        async with self._server.session_manager.run():
            self._transport = transport
            try:
                yield
            finally:
                self._transport = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            caller = await self._authenticate(request)
        except PalimpsestError as e:
            slug, status, title = problem_of(e)
            headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
            response = problem_response(
                status, slug, title, str(e), instance=request.url.path, headers=headers
            )
            await response(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        state[CALLER_STATE] = caller
        state["tenant_id"] = str(caller.tenant_id)  # as routes leave it: logs, write notices
        if self._transport is None:
            response = problem_response(
                503, "not-ready", "Not ready", "the MCP endpoint starts with the app's lifespan"
            )
            await response(scope, receive, send)
            return
        if request.method == "POST":
            body = await request.body()
            refused = refusal(body)
            if refused is not None:
                answer = JSONResponse(refused.model_dump(mode="json"), status_code=400)
                await answer(scope, receive, send)
                return
            receive = _replayed(body, receive)
        await self._transport(scope, receive, send)

    async def _authenticate(self, request: Request) -> Caller:
        credentials = await _bearer(request)
        if credentials is None and "authorization" not in request.headers:
            credentials = self._local  # None unless configured, on loopback only
        return get_caller(await get_any_caller(request, credentials))


def _replayed(body: bytes, receive: Receive) -> Receive:
    """Return ``receive`` with the body read already handed on first."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def mount_mcp(app: FastAPI, host: str, settings: McpSettings | None = None) -> McpEndpoint:
    """Serve the MCP server at ``/mcp`` on ``app`` (bound to ``host``), over the app's
    runtime and write path; its transport runs for the app's lifespan.

    Raises:
        ConfigurationError: a local token is configured and ``host`` is not loopback.
    """
    settings = settings or McpSettings()
    local = settings.local_token
    if local is not None and not is_loopback(host):
        msg = (
            "PALIMPSEST_MCP_LOCAL_TOKEN serves /mcp without a token, so it is refused "
            f"unless PALIMPSEST_HOST is a loopback address (it is {host!r})"
        )
        raise ConfigurationError(msg)
    state = app.state
    backend = Backend(
        runtime=state.runtime,
        writer=state.writer,
        # Read at each call: tests replace the app's clock after building it.
        wake=lambda: state.wake(),  # noqa: PLW0108
        clock=lambda: state.clock(),  # noqa: PLW0108
        drains=state.drains,
        conflict_wait_s=settings.conflict_wait_s,
    )
    server = build_server(backend, admin_tools=settings.admin_tools)
    token = None if local is None else local.get_secret_value()
    endpoint = McpEndpoint(server, backend, host, token)
    app.router.routes.append(Route(MCP_PATH, endpoint, methods=["GET", "POST", "DELETE"]))
    outer = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(started: Any) -> AsyncIterator[Any]:
        async with endpoint.running(), outer(started) as inner:
            yield inner

    app.router.lifespan_context = lifespan
    return endpoint
