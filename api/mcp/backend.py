"""What every MCP tool stands on: the caller, the one write path, and tool results.

The caller is never a tool argument. Over HTTP it is the bearer token's, which
:mod:`palimpsest.api.mcp.http` authenticated before the request reached the MCP server
and left on the request's state; over stdio (and in-process) it is the
process's token (``PALIMPSEST_TOKEN``), authenticated again on every call (a
check is trusted for ``PALIMPSEST_TOKEN_CACHE_S`` seconds, as over HTTP),
so a revoked token or a deleted tenant stops working.

Writes go through the same :class:`~palimpsest.projections.commands.writer.Writer` and the
same specs (:mod:`palimpsest.api.specs`) as the HTTP routes; reads call the same views.
Refusals come back as tool errors (``isError``) whose text is the RFC 9457
problem document the HTTP API would answer, so an agent (or a test) branches on
its ``type``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from palimpsest.api.deps import get_caller
from palimpsest.api.mcp.models import BeliefStatus
from palimpsest.api.problems import problem_of, problem_type
from palimpsest.domain.errors import AuthenticationError, PalimpsestError
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import TOKEN_CACHE_S, authenticate
from palimpsest.projections.commands.writer import Writer, WriteSpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.current_beliefs import current_belief

__all__ = [
    "Backend",
    "CALLER_STATE",
    "problem_result",
]

_log = logging.getLogger(__name__)

CALLER_STATE = "palimpsest_mcp_caller"
"""Where :mod:`palimpsest.api.mcp.http` leaves the authenticated caller on the request state."""


@dataclass(frozen=True)
class Backend:
    """One process's runtime and write path, as the tools use them."""

    runtime: Runtime
    writer: Writer
    wake: Callable[[], None]
    """A hint to the drains after a write committed."""
    clock: Callable[[], datetime]
    token: str | None = None
    """The token every call acts as when no HTTP request carries one (stdio)."""
    token_cache_s: float = TOKEN_CACHE_S
    """How long a check of ``token`` is trusted (``PALIMPSEST_TOKEN_CACHE_S``)."""

    def caller(self, ctx: Context) -> Caller:
        """Return who is calling: the HTTP request's authenticated caller, else the
        process's token's.

        Raises:
            AuthenticationError: neither is there, or the token is unknown.
            TenantClosedError: the tenant's deletion was requested.
        """
        request = ctx.request_context.request
        if isinstance(request, Request):
            found = request.scope.get("state", {}).get(CALLER_STATE)
            if isinstance(found, Caller):
                return found
        if self.token is None:
            msg = "no token: send Authorization: Bearer <token>, or set PALIMPSEST_TOKEN"
            raise AuthenticationError(msg)
        return get_caller(authenticate(self.runtime.log, self.token, max_age_s=self.token_cache_s))

    def write(self, caller: Caller, specs: Sequence[WriteSpec]) -> list[dict[str, Any]]:
        """Apply ``specs`` all-or-nothing through the one write path; return each
        item's fields (with its log position), and wake the drains."""
        outcome = self.writer.write(caller, specs, batch=len(specs) > 1)
        if not outcome.replayed:
            self.wake()
        body = outcome.body
        results: list[dict[str, Any]] = body["results"] if len(specs) > 1 else [body]
        return results

    def status(self, caller: Caller, memory_id: UUID) -> BeliefStatus:
        """Return the memory's belief status now (``pending`` until revision caught up)."""
        answer = current_belief(self.runtime.log, caller.tenant_id, memory_id, now=self.clock)
        status: BeliefStatus = answer.status
        return status

    def run(self, ctx: Context, call: Callable[[Caller], BaseModel]) -> CallToolResult:
        """Run one tool call as its caller; return its result, or its refusal as a
        tool error carrying the problem document."""
        try:
            result = call(self.caller(ctx))
        except PalimpsestError as e:
            return problem_result(e)
        except ValidationError as e:
            return _validation_result(e)
        structured = result.model_dump(mode="json")
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(structured))],
            structured_content=structured,
        )


def problem_result(error: PalimpsestError) -> CallToolResult:
    """Return a tool error whose text is the problem document of ``error``."""
    slug, status, title = problem_of(error)
    detail = str(error)
    if status >= 500:
        _log.error("mcp tool failed", extra={"type": slug, "error": detail})
        if status != 503:  # as the HTTP API: an internal failure's detail stays in the log
            detail = "the service failed; see its log"
    return _error({"type": problem_type(slug), "title": title, "status": status, "detail": detail})


def _validation_result(error: ValidationError) -> CallToolResult:
    """Return a tool error for arguments the HTTP API's request models refuse."""
    errors = [
        {"pointer": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
        for e in error.errors()
    ]
    return _error(
        {
            "type": problem_type("validation-error"),
            "title": "Validation error",
            "status": 422,
            "detail": "the arguments are not valid",
            "errors": errors,
        }
    )


def _error(problem: dict[str, Any]) -> CallToolResult:
    text = TextContent(type="text", text=json.dumps(problem))
    return CallToolResult(content=[text], is_error=True)
