"""Dependencies shared by the routers: the runtime, the caller, idempotent writes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

from api.specs import to_specs
from domain.errors import AuthenticationError, InvalidInputError, TenantClosedError
from domain.limits import MAX_IDEMPOTENCY_KEY_CHARS
from projections.commands.caller import Caller
from projections.commands.tokens import authenticate
from projections.commands.writer import Writer
from projections.runtime import Runtime

__all__ = [
    "AnyCallerDep",
    "CallerDep",
    "ClockDep",
    "IdempotencyKeyDep",
    "RuntimeDep",
    "WriterDep",
    "get_any_caller",
    "get_caller",
    "get_clock",
    "get_idempotency_key",
    "get_runtime",
    "get_writer",
    "perform_write",
]

_bearer = HTTPBearer(auto_error=False, description="A token from `palimpsest token create`.")
_KEY_PATTERN = re.compile(r"^[\x21-\x7e]+$")


def get_runtime(request: Request) -> Runtime:
    """Return the process's runtime (database and event log)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def get_writer(request: Request) -> Writer:
    """Return the process's write path."""
    writer: Writer = request.app.state.writer
    return writer


def get_any_caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    runtime: Annotated[Runtime, Depends(get_runtime)],
) -> Caller:
    """Authenticate the bearer token, whether or not the tenant is being deleted
    (only erasure receipts take such callers).

    Raises:
        AuthenticationError: no token, a malformed one, or an unknown one.
    """
    if credentials is None:
        msg = "this endpoint needs an Authorization: Bearer <token> header"
        raise AuthenticationError(msg)
    caller = authenticate(runtime.log, credentials.credentials)
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


def get_idempotency_key(
    idempotency_key: Annotated[
        str | None,
        Header(
            description="Repeat a POST safely: the same key and body return the first response.",
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


def get_clock(request: Request) -> Callable[[], datetime]:
    """Return the service's clock (tests give the app a fake one)."""
    clock: Callable[[], datetime] = request.app.state.clock
    return clock


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]
WriterDep = Annotated[Writer, Depends(get_writer)]
CallerDep = Annotated[Caller, Depends(get_caller)]
AnyCallerDep = Annotated[Caller, Depends(get_any_caller)]
IdempotencyKeyDep = Annotated[str | None, Depends(get_idempotency_key)]


def perform_write(
    request: Request,
    response: Response,
    writer: Writer,
    caller: Caller,
    key: str | None,
    body: BaseModel,
    *,
    path_ids: dict[str, Any] | None = None,
    batch: bool = False,
) -> dict[str, Any]:
    """Apply one write request (or batch) and return its response body.

    The idempotency digest covers the method, the path and the validated
    body, so reformatting JSON does not make a retry look like a new request.
    """
    specs = to_specs(body, path_ids or {})
    idempotency = None
    if key is not None:
        canonical = json.dumps(
            [request.method, request.url.path, body.model_dump(mode="json")], sort_keys=True
        )
        idempotency = (key, "sha256:" + hashlib.sha256(canonical.encode()).hexdigest())
    outcome = writer.write(caller, specs, batch=batch, idempotency=idempotency)
    response.status_code = outcome.status_code
    if outcome.replayed:
        response.headers["Idempotent-Replayed"] = "true"
    else:
        request.app.state.wake()  # after commit: a hint, never inside the transaction
    return outcome.body
