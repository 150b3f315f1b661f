"""RFC 9457 problem details: one mapping from error class to type and status."""

from __future__ import annotations

import logging
import re
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import DataError as LibraryDataError
from eventsourcing.persistence import InterfaceError as LibraryInterfaceError
from eventsourcing.persistence import OperationalError as LibraryOperationalError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from palimpsest.api._admission import ConcurrencyLimitError
from palimpsest.api._deps import RepeatedHeaderError
from palimpsest.api._query_params import UnknownQueryParameterError
from palimpsest.api._strict_json import DuplicateKeyError, JsonTooDeepError, MalformedJsonError
from palimpsest.domain.errors import (
    AlreadySettledError,
    AuthenticationError,
    CollapseGuardError,
    ConfigurationError,
    ConfirmationRequiredError,
    ConflictError,
    ContentErasedError,
    ContentExpiredError,
    ContentTooLargeError,
    EdgeExistsError,
    EdgeNotAllowedError,
    EvidenceErasedError,
    EvidenceOutOfRangeError,
    EvidenceRetractedError,
    IdempotencyKeyReusedError,
    InconsistentPolicyError,
    InvalidInputError,
    ItemsChangedError,
    MemoryForgottenError,
    MemorySupersededError,
    NotFoundError,
    PalimpsestError,
    PassDisabledError,
    PermissionDeniedError,
    ProposalClosedError,
    StaleProposalError,
    StructurallyArchivedError,
    TenantClosedError,
)
from palimpsest.domain.tenant import InvalidTenantNameError
from palimpsest.projections.commands.proposals import ResolutionNotApplicableError
from palimpsest.projections.judgment.judge import JudgeUnavailableError
from palimpsest.projections.store.errors import (
    ConcurrentWriteError,
    DatabaseUnavailableError,
    DataDirectoryInUseError,
    EmbedderUnavailableError,
    MemoryUnprojectableError,
    PgvectorMissingError,
    SchemaTooNewError,
    StaleReadError,
)
from palimpsest.projections.views.erasures import erasure_placeholder

__all__ = [
    "PROBLEMS",
    "install_problem_handlers",
    "problem_of",
    "problem_response",
    "problem_type",
]

_log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

PROBLEMS: dict[type[PalimpsestError], tuple[str, int, str]] = {
    PalimpsestError: ("internal-error", 500, "Internal error"),
    InvalidInputError: ("invalid-input", 422, "Invalid input"),
    InconsistentPolicyError: ("inconsistent-policy", 422, "Inconsistent forgetting policy"),
    InvalidTenantNameError: ("invalid-tenant-name", 422, "Invalid tenant name"),
    UnknownQueryParameterError: ("unknown-query-parameter", 400, "Unknown query parameter"),
    RepeatedHeaderError: ("repeated-header", 400, "Repeated header"),
    MalformedJsonError: ("malformed-json", 400, "Malformed JSON"),
    DuplicateKeyError: ("duplicate-key", 400, "Duplicate key"),
    JsonTooDeepError: ("json-too-deep", 400, "JSON too deep"),
    ContentTooLargeError: ("content-too-large", 413, "Content too large"),
    EvidenceOutOfRangeError: ("evidence-out-of-range", 422, "Evidence out of range"),
    EvidenceRetractedError: ("evidence-retracted", 422, "Evidence retracted"),
    EvidenceErasedError: ("evidence-erased", 422, "Evidence erased"),
    EdgeNotAllowedError: ("edge-not-allowed", 422, "Edge not allowed"),
    NotFoundError: ("not-found", 404, "Not found"),
    ContentExpiredError: ("content-expired", 410, "Content expired"),
    ContentErasedError: ("content-erased", 410, "Content erased"),
    TenantClosedError: ("tenant-deleted", 410, "Tenant deleted"),
    ConfirmationRequiredError: ("confirmation-required", 428, "Confirmation required"),
    ConflictError: ("conflict", 409, "Conflict"),
    IdempotencyKeyReusedError: ("idempotency-key-reused", 409, "Idempotency key reused"),
    EdgeExistsError: ("edge-exists", 409, "Edge exists"),
    StructurallyArchivedError: ("structurally-archived", 409, "Structurally archived"),
    MemoryForgottenError: ("memory-forgotten", 409, "Memory forgotten"),
    MemorySupersededError: ("memory-superseded", 409, "Memory superseded"),
    AlreadySettledError: ("already-settled", 409, "Already settled"),
    StaleProposalError: ("stale-proposal", 409, "Stale proposal"),
    CollapseGuardError: ("collapse-guard", 409, "Collapse guard"),
    PassDisabledError: ("pass-disabled", 409, "Forgetting pass disabled"),
    ItemsChangedError: ("items-changed", 409, "Items to judge changed"),
    JudgeUnavailableError: ("judge-unavailable", 502, "Judge unavailable"),
    ProposalClosedError: ("proposal-closed", 409, "Proposal closed"),
    ResolutionNotApplicableError: (
        "resolution-not-applicable",
        409,
        "Resolution not applicable",
    ),
    ConcurrentWriteError: ("concurrent-write", 409, "Concurrent write"),
    StaleReadError: ("concurrent-write", 409, "Concurrent write"),
    MemoryUnprojectableError: ("memory-unprojectable", 409, "Memory unprojectable"),
    AuthenticationError: ("unauthenticated", 401, "Unauthenticated"),
    PermissionDeniedError: ("forbidden", 403, "Forbidden"),
    ConfigurationError: ("misconfigured", 500, "Service misconfigured"),
    PgvectorMissingError: ("misconfigured", 500, "Service misconfigured"),
    SchemaTooNewError: ("misconfigured", 500, "Service misconfigured"),
    DataDirectoryInUseError: ("misconfigured", 500, "Service misconfigured"),
    DatabaseUnavailableError: ("database-unavailable", 503, "Database unavailable"),
    EmbedderUnavailableError: ("embedder-unavailable", 503, "Embedder unavailable"),
    ConcurrencyLimitError: ("concurrency-limit", 429, "Concurrency limit"),
}

_UNAVAILABLE: tuple[type[Exception], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    LibraryOperationalError,
    LibraryInterfaceError,
)
"""Driver errors that mean the database cannot be reached (pool timeouts included)."""

_HTTP_SLUGS = {
    400: "malformed-request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    413: "content-too-large",
    415: "unsupported-media-type",
}


def problem_type(slug: str) -> str:
    """Return the ``type`` URI of a problem slug."""
    return f"urn:palimpsest:problem:{slug}"


def problem_response(
    status: int,
    slug: str,
    title: str,
    detail: str,
    *,
    instance: str | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """Return a ``application/problem+json`` response."""
    body: dict[str, Any] = {
        "type": problem_type(slug),
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance is not None:
        body["instance"] = instance
    body.update(extra or {})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def problem_of(error: PalimpsestError) -> tuple[str, int, str]:
    """Return the problem ``(slug, status, title)`` of an error: its nearest class's."""
    for cls in type(error).__mro__:
        if cls in PROBLEMS:
            return PROBLEMS[cls]
    return PROBLEMS[PalimpsestError]


def _extension(error: PalimpsestError) -> dict[str, Any] | None:
    """Return the problem's extension members: the erasure that removed what was
    asked for, or the token that would confirm a destructive request."""
    if isinstance(error, ContentErasedError | TenantClosedError):
        placeholder = erasure_placeholder(UUID(str(error.erasure_id)))
        return {"erasure": placeholder.model_dump(mode="json")}
    if isinstance(error, ConfirmationRequiredError):
        return {"confirmation_token": error.token}
    return None


_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


def _allowed_methods(request: Request) -> list[str]:
    """Return every method the API documents at the request's path, sorted."""
    methods: set[str] = set()
    for template, item in request.app.openapi().get("paths", {}).items():
        parts = re.split(r"(\{[^/}]+\})", template)
        pattern = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
        if re.fullmatch(pattern, request.url.path):
            methods |= {m.upper() for m in item if m in _METHODS}
    return sorted(methods)


def install_problem_handlers(app: FastAPI) -> None:
    """Render every error as problem+json: ours, HTTP errors and validation errors."""

    async def palimpsest_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PalimpsestError)
        slug, status, title = problem_of(exc)
        if status >= 500:
            _log.error("request failed", extra={"path": request.url.path, "error": str(exc)})
            detail = str(exc) if status == 503 else "the service failed; see its log"
        else:
            detail = str(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status == 503:
            headers = {"Retry-After": "5"}
        if isinstance(exc, ConcurrencyLimitError):
            headers = {"Retry-After": str(exc.retry_after_s)}
        return problem_response(
            status,
            slug,
            title,
            detail,
            instance=request.url.path,
            headers=headers,
            extra=_extension(exc),
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers) if exc.headers else None
        if exc.status_code == 405 and (allowed := _allowed_methods(request)):
            # Starlette names only the methods of the first route whose path matched;
            # RFC 9110 wants every method the resource supports.
            headers = {**(headers or {}), "Allow": ", ".join(allowed)}
        slug = _HTTP_SLUGS.get(exc.status_code, "http-error")
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in detail:
            if isinstance(exc.__cause__, ValueError) and "integer string" in str(exc.__cause__):
                # Valid JSON, but a number longer than Python reads (4,300 digits):
                # far beyond any field's bound, so refused as the value it is.
                return await palimpsest_error(
                    request,
                    InvalidInputError(
                        "the request body holds an integer of more than 4,300 digits; "
                        "no field takes a number that large"
                    ),
                )
            # FastAPI's answer to a body that is not UTF-8 (it decodes before parsing).
            slug, detail = "malformed-json", "the request body is not valid UTF-8 JSON"
        return problem_response(
            exc.status_code,
            slug,
            slug.replace("-", " ").capitalize(),
            detail,
            instance=request.url.path,
            headers=headers,
        )

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {
                "pointer": "/" + "/".join(str(p) for p in err.get("loc", ())),
                "message": str(err.get("msg", "invalid")),
            }
            for err in exc.errors()
        ]
        if any(err.get("type") == "json_invalid" for err in exc.errors()):
            return problem_response(
                400,
                "malformed-json",
                "Malformed JSON",
                "the request body is not valid JSON",
                instance=request.url.path,
                extra={"errors": errors},
            )
        return problem_response(
            422,
            "validation-error",
            "Validation error",
            f"{len(errors)} invalid field(s): "
            + "; ".join(f"{e['pointer']}: {e['message']}" for e in errors),
            instance=request.url.path,
            extra={"errors": errors},
        )

    async def database_error(request: Request, exc: Exception) -> JSONResponse:
        # A lost, refused or timed-out connection, from any read or write that
        # did not translate it itself: the caller may retry, nothing was
        # acknowledged. Any other driver error is a bug (500).
        return await palimpsest_error(
            request, DatabaseUnavailableError(f"the database is unavailable: {exc}".strip())
        )

    async def data_error(request: Request, exc: Exception) -> JSONResponse:
        # The database refused a value (a NUL in text, a number out of range)
        # that validation let through: the caller's input, not an outage.
        _log.warning("database refused a value", extra={"path": request.url.path})
        return await palimpsest_error(
            request, InvalidInputError(f"the database refused a value of the request: {exc}")
        )

    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("unhandled error", extra={"path": request.url.path})
        return problem_response(
            500,
            "internal-error",
            "Internal error",
            "the service failed; see its log",
            instance=request.url.path,
            # Sent by Starlette's outermost middleware, past api._edge.Edge's header.
            headers={"X-Content-Type-Options": "nosniff"},
        )

    app.add_exception_handler(PalimpsestError, palimpsest_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    for unavailable in _UNAVAILABLE:
        app.add_exception_handler(unavailable, database_error)
    for refused in (psycopg.DataError, LibraryDataError):
        app.add_exception_handler(refused, data_error)
    app.add_exception_handler(Exception, unexpected_error)
