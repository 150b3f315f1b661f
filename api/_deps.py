"""Dependencies shared by the routers: the runtime, the caller, its role, writes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from palimpsest.api._candidate_budget import CandidateBudget
from palimpsest.api._worker_threads import in_thread
from palimpsest.domain.errors import AuthenticationError, InvalidInputError, TenantClosedError
from palimpsest.domain.limits import MAX_IDEMPOTENCY_KEY_CHARS
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, verified_caller
from palimpsest.projections.commands.writer import WriteOutcome, Writer, WriteSpec
from palimpsest.projections.runtime import Runtime

__all__ = [
    "AdminDep",
    "AnyAdminDep",
    "AnyCallerDep",
    "CallerDep",
    "ClockDep",
    "IdempotencyKeyDep",
    "RepeatedHeaderError",
    "RuntimeDep",
    "UnkeyedWriteDep",
    "WriteDep",
    "WriteRequest",
    "WriterDep",
    "get_admin",
    "get_any_admin",
    "get_any_caller",
    "get_caller",
    "get_clock",
    "get_idempotency_key",
    "get_open_caller",
    "get_runtime",
    "get_unkeyed_write",
    "get_write",
    "get_writer",
    "recently_verified",
]

_bearer = HTTPBearer(auto_error=False, description="A token from `palimpsest token create`.")
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]+$")

# Fields a write body gained after idempotency records were first kept (they are
# kept for ever), with the value that means "not used". A request that leaves one at
# that value digests as it did before the field existed, so a retry sent across an
# upgrade still replays its record rather than answering idempotency-key-reused.
# A field added to a write body later goes here with its default.
_LATER_FIELDS: dict[str, object] = {"supersedes": [], "restore": False}


def _without_later_defaults(value: Any) -> Any:
    """``value`` (a dumped body) without the :data:`_LATER_FIELDS` left at their
    defaults, at any depth (a batch's items too)."""
    if isinstance(value, dict):
        return {
            key: _without_later_defaults(item)
            for key, item in value.items()
            if not (key in _LATER_FIELDS and item == _LATER_FIELDS[key])
        }
    if isinstance(value, list):
        return [_without_later_defaults(item) for item in value]
    return value


async def get_runtime(request: Request) -> Runtime:
    """Return the process's runtime (database and event log)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


async def get_writer(request: Request) -> Writer:
    """Return the process's write path."""
    writer: Writer = request.app.state.writer
    return writer


class RepeatedHeaderError(InvalidInputError):
    """Raised when a header that must appear once appears several times (400)."""


async def get_any_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Authenticate the bearer token, whether or not the tenant is being deleted
    (only erasure receipts take such callers).

    Raises:
        AuthenticationError: no token, a malformed one, or an unknown one.
    """
    if len(request.headers.getlist("authorization")) > 1:
        # Which one would count depends on the proxy in front: refuse, never guess.
        msg = "send one Authorization header, not several"
        raise RepeatedHeaderError(msg)
    if credentials is None:
        msg = "this endpoint needs an Authorization: Bearer <token> header"
        raise AuthenticationError(msg)
    # Async, like every dependency here: a synchronous one costs a thread hop per
    # request. Only a token this process has not verified lately asks the database.
    # The runtime is read off the app, not taken as a dependency: every request
    # solves this one, and each dependency costs FastAPI its own resolution.
    caller = recently_verified(request, credentials.credentials)
    if caller is None:
        runtime: Runtime = request.app.state.runtime
        max_age_s: float = request.app.state.token_cache_s
        caller = await in_thread(
            authenticate, runtime.log, credentials.credentials, max_age_s=max_age_s
        )
        request.state.tenant_id = str(caller.tenant_id)
    return caller


def recently_verified(request: Request, token: str) -> Caller | None:
    """Return the caller of ``token`` if this process verified it within the app's
    ``token_cache_s`` (no I/O), noting its tenant for the request's log line; None
    when the database must be asked."""
    caller = verified_caller(token, max_age_s=request.app.state.token_cache_s)
    if caller is not None:
        request.state.tenant_id = str(caller.tenant_id)
    return caller


def get_caller(caller: Annotated[Caller, Depends(get_any_caller)]) -> Caller:
    """Authenticate the bearer token of a tenant that is open.

    Raises:
        AuthenticationError: no token, a malformed one, or an unknown one.
        TenantClosedError: the tenant's deletion was requested: only its receipt remains.
    """
    if caller.closed_by is not None:
        msg = (
            f"tenant {caller.tenant_id} was deleted (erasure {caller.closed_by}); "
            "only its receipt can be read"
        )
        raise TenantClosedError(msg, caller.closed_by)
    return caller


async def get_idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            description="Repeat a POST safely: the same key and body return the first response.",
            # Published, so that clients (and the fuzzer) know the form checked below.
            json_schema_extra={
                "pattern": _KEY_PATTERN.pattern,
                "maxLength": MAX_IDEMPOTENCY_KEY_CHARS,
            },
        ),
    ] = None,
) -> str | None:
    """Return the ``Idempotency-Key`` header after checking its form.

    Raises:
        InvalidInputError: the key is empty, too long, or not printable ASCII.
    """
    if idempotency_key is None:
        return None
    if len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS or not _KEY_PATTERN.match(idempotency_key):
        msg = (
            f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII "
            "characters without spaces"
        )
        raise InvalidInputError(msg)
    return idempotency_key


async def get_clock(request: Request) -> Callable[[], datetime]:
    """Return the service's clock (tests give the app a fake one)."""
    clock: Callable[[], datetime] = request.app.state.clock
    return clock


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]
WriterDep = Annotated[Writer, Depends(get_writer)]


async def get_open_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Authenticate the bearer token of a tenant that is open (``CallerDep``).

    Raises:
        AuthenticationError, TenantClosedError: as :func:`get_caller`.
    """
    # get_any_caller called, not depended on: one dependency fewer for FastAPI to
    # solve on every request.
    return get_caller(await get_any_caller(request, credentials))


CallerDep = Annotated[Caller, Depends(get_open_caller)]
AnyCallerDep = Annotated[Caller, Depends(get_any_caller)]
IdempotencyKeyDep = Annotated[str | None, Depends(get_idempotency_key)]


def _admin(request: Request, caller: Caller) -> Caller:
    # The command layer checks each write's role itself; this guards what is
    # not a write (reads, caches) or must be refused before a write is prepared.
    caller.require("admin", f"{request.method} {request.url.path}")
    return caller


async def get_admin(request: Request, caller: CallerDep) -> Caller:
    """Authenticate an administrator of a tenant that is open.

    Raises:
        AuthenticationError, TenantClosedError: as for any caller.
        PermissionDeniedError: the token's role is not admin.
    """
    return _admin(request, caller)


async def get_any_admin(request: Request, caller: AnyCallerDep) -> Caller:
    """Authenticate an administrator, whether or not the tenant is being deleted.

    Raises:
        AuthenticationError: as for any caller.
        PermissionDeniedError: the token's role is not admin.
    """
    return _admin(request, caller)


AdminDep = Annotated[Caller, Depends(get_admin)]
AnyAdminDep = Annotated[Caller, Depends(get_any_admin)]


@dataclass(frozen=True)
class WriteRequest:
    """A write as a route hands it to the command layer: who asks, with which
    ``Idempotency-Key``, through which writer, and the response it shapes."""

    caller: Caller
    writer: Writer
    runtime: Runtime
    key: str | None
    method: str
    path: str
    response: Response
    drains: bool
    """Whether a drain is known to run (then a write may wait for its embedding)."""
    wake: Callable[[], None]
    candidate_budget: CandidateBudget = field(default_factory=lambda: CandidateBudget(0.0))
    """How long a write may wait for its contradiction candidates before answering pending."""

    def digest(self, body: BaseModel) -> str:
        """Return the request's digest for its idempotency record.

        It covers the method, the path and the validated body, so reformatting
        JSON does not make a retry look like a new request.
        """
        fields = _without_later_defaults(body.model_dump(mode="json"))
        canonical = json.dumps([self.method, self.path, fields], sort_keys=True)
        return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()

    def idempotency(self, body: BaseModel) -> tuple[str, str] | None:
        """Return ``(key, digest)`` of the request's ``Idempotency-Key`` and ``body``
        (:meth:`digest`), as the command layer takes it; None without a key."""
        return None if self.key is None else (self.key, self.digest(body))

    def answer(self, outcome: WriteOutcome) -> dict[str, Any]:
        """Return the response body of a write's ``outcome``, its status set on the
        response, with ``Idempotent-Replayed`` when it replays an earlier identical
        request; a write that committed wakes the drains (a hint, after the commit:
        call it where a write may wait, as the write itself may)."""
        self.response.status_code = outcome.status_code
        if outcome.replayed:
            self.response.headers["Idempotent-Replayed"] = "true"
        else:
            self.wake()
        return outcome.body

    def perform(self, body: BaseModel, spec: WriteSpec) -> dict[str, Any]:
        """Apply one write (:meth:`Writer.write`) and return its response body
        (:meth:`answer`)."""
        return self._perform(body, [spec], batch=False)

    def perform_batch(self, body: BaseModel, specs: Sequence[WriteSpec]) -> dict[str, Any]:
        """Apply a batch all-or-nothing and return ``{"results": [...]}``."""
        return self._perform(body, specs, batch=True)

    def _perform(
        self, body: BaseModel, specs: Sequence[WriteSpec], *, batch: bool
    ) -> dict[str, Any]:
        outcome = self.writer.write(
            self.caller, specs, batch=batch, idempotency=self.idempotency(body)
        )
        return self.answer(outcome)


def _write_request(
    request: Request, response: Response, caller: Caller, key: str | None
) -> WriteRequest:
    state = request.app.state
    return WriteRequest(
        caller=caller,
        writer=state.writer,
        runtime=state.runtime,
        key=key,
        method=request.method,
        path=request.url.path,
        response=response,
        drains=state.drains,
        wake=state.wake,
        candidate_budget=state.candidate_budget,
    )


async def get_write(
    request: Request, response: Response, caller: CallerDep, key: IdempotencyKeyDep
) -> WriteRequest:
    """Return the write a route performs, with its ``Idempotency-Key`` if given."""
    return _write_request(request, response, caller, key)


async def get_unkeyed_write(
    request: Request, response: Response, caller: CallerDep
) -> WriteRequest:
    """Return a write that takes no ``Idempotency-Key`` (a confirmation token, or
    the state it leaves, makes repeating it safe)."""
    return _write_request(request, response, caller, None)


WriteDep = Annotated[WriteRequest, Depends(get_write)]
UnkeyedWriteDep = Annotated[WriteRequest, Depends(get_unkeyed_write)]
