"""What every MCP tool stands on: the caller, the one write path, and tool results.

The caller is never a tool argument. Over HTTP it is the bearer token's, which
:mod:`palimpsest.api.mcp._http` authenticated before the request reached the MCP server
and left on the request's state; over stdio (and in-process) it is the
process's token (``PALIMPSEST_TOKEN``), authenticated again on every call (a
check is trusted for ``PALIMPSEST_TOKEN_CACHE_S`` seconds, as over HTTP),
so a revoked token or a deleted tenant stops working.

Writes go through the same :class:`~palimpsest.projections.commands.writer.Writer` and the
same specs (:mod:`palimpsest.api._specs`) as the HTTP routes; reads call the same views.
A write tool's ``request_id`` is the HTTP API's ``Idempotency-Key``: the same
records, keyed by principal, so a call retried after a lost answer replays the
first one's instead of writing twice. Refusals come back as tool errors
(``isError``) whose text is the RFC 9457 problem document the HTTP API would
answer, so an agent (or a test) branches on its ``type``.

Every write notes its position as its caller's (:mod:`palimpsest.api.mcp._own_writes`),
so that the caller's next ``recall`` finds it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from palimpsest.api._deps import get_caller
from palimpsest.api._problems import problem_of, problem_type
from palimpsest.api._worker_threads import in_thread
from palimpsest.api.mcp._models import BeliefStatus
from palimpsest.api.mcp._own_writes import WrittenPositions
from palimpsest.domain.errors import AuthenticationError, PalimpsestError
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import TOKEN_CACHE_S, authenticate
from palimpsest.projections.commands.writer import Writer, WriteSpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.current_beliefs import current_belief

__all__ = [
    "Backend",
    "CALLER_STATE",
    "Written",
    "problem_result",
    "validation_result",
]

_log = logging.getLogger(__name__)

CALLER_STATE = "palimpsest_mcp_caller"
"""Where :mod:`palimpsest.api.mcp._http` leaves the authenticated caller on the request state."""


@dataclass(frozen=True)
class Written:
    """What a write answered: each item's fields (with its position), and whether it
    replays an earlier call with the same ``request_id``."""

    results: list[dict[str, Any]]
    replayed: bool


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
    drains: bool = False
    """Whether a drain is known to run (then ``remember`` waits, bounded, for the new
    memory's embedding to look for its potential conflicts)."""
    conflict_wait_s: float = 1.0
    """The bound of that wait (``PALIMPSEST_MCP_CONFLICT_WAIT_S``)."""
    written: WrittenPositions = field(default_factory=WrittenPositions)
    """The last position each caller wrote at, which its recalls wait for."""

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

    def write(
        self,
        caller: Caller,
        specs: Sequence[WriteSpec],
        *,
        request: tuple[str, str] | None = None,
    ) -> Written:
        """Apply ``specs`` all-or-nothing through the one write path; return each
        item's fields (with its position), note the highest position as the caller's
        (its next recall waits for it), and wake the drains. ``request`` is
        ``(request_id, digest)`` (:meth:`request`): a request_id seen before with the
        same call replays its answer and writes nothing.

        Raises:
            IdempotencyKeyReusedError: the request_id was used for another call.
        """
        outcome = self.writer.write(caller, specs, batch=len(specs) > 1, idempotency=request)
        if not outcome.replayed:
            self.wake()
        body = outcome.body
        results: list[dict[str, Any]] = body["results"] if len(specs) > 1 else [body]
        positions = [r["position"] for r in results if isinstance(r.get("position"), int)]
        if positions:
            self.written.note(caller, max(positions))
        return Written(results, outcome.replayed)

    @staticmethod
    def request(
        tool: str, request_id: str | None, arguments: dict[str, Any]
    ) -> tuple[str, str] | None:
        """Return the idempotency record's key and digest of a call of ``tool`` with
        ``arguments`` (without its ``request_id``), or None without a request_id. The
        digest names the tool, so an HTTP request with the same key never matches."""
        if request_id is None:
            return None
        canonical = json.dumps(["mcp", tool, arguments], sort_keys=True, default=str)
        return request_id, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

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
            return validation_result(e)
        return _result(result)

    async def run_async(
        self, ctx: Context, call: Callable[[Caller], Awaitable[BaseModel]]
    ) -> CallToolResult:
        """:meth:`run` for a tool that awaits (a bounded wait that holds no thread):
        ``call`` runs on the event loop and hands its blocking work to worker threads."""
        try:
            caller = await in_thread(self.caller, ctx)
            result = await call(caller)
        except PalimpsestError as e:
            return problem_result(e)
        except ValidationError as e:
            return validation_result(e)
        return _result(result)


def _result(result: BaseModel) -> CallToolResult:
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


def validation_result(error: ValidationError) -> CallToolResult:
    """Return a tool error for arguments that break the tool's input schema or the
    HTTP API's request models: ``validation-error``, with a pointer and a message per
    bad argument (never pydantic's own text)."""
    errors = [
        {"pointer": "/" + "/".join(str(p) for p in e["loc"]), "message": e["msg"]}
        for e in error.errors(include_url=False)
    ]
    return _error(
        {
            "type": problem_type("validation-error"),
            "title": "Validation error",
            "status": 422,
            "detail": f"{len(errors)} invalid argument(s): "
            + "; ".join(f"{e['pointer']}: {e['message']}" for e in errors),
            "errors": errors,
        }
    )


def _error(problem: dict[str, Any]) -> CallToolResult:
    text = TextContent(type="text", text=json.dumps(problem))
    return CallToolResult(content=[text], is_error=True)
