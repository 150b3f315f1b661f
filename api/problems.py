"""RFC 9457 problem details: one mapping from error class to type and status."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from domain.errors import (
    AuthenticationError,
    ConfigurationError,
    ConfirmationRequiredError,
    ConflictError,
    ContentErasedError,
    ContentExpiredError,
    ContentTooLargeError,
    EdgeExistsError,
    EdgeNotAllowedError,
    EvidenceOutOfRangeError,
    IdempotencyKeyReusedError,
    InvalidInputError,
    NotFoundError,
    PalimpsestError,
    PermissionDeniedError,
    TenantClosedError,
)
from projections.store.errors import (
    ConcurrentWriteError,
    DatabaseUnavailableError,
    DataDirectoryInUseError,
    EmbedderUnavailableError,
    PgvectorMissingError,
    SchemaTooNewError,
)
from projections.views.erasures import erasure_placeholder

__all__ = [
    "PROBLEMS",
    "install_problem_handlers",
    "problem_response",
    "problem_type",
]

_log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

PROBLEMS: dict[type[PalimpsestError], tuple[str, int, str]] = {
    PalimpsestError: ("internal-error", 500, "Internal error"),
    InvalidInputError: ("invalid-input", 422, "Invalid input"),
    ContentTooLargeError: ("content-too-large", 413, "Content too large"),
    EvidenceOutOfRangeError: ("evidence-out-of-range", 422, "Evidence out of range"),
    EdgeNotAllowedError: ("edge-not-allowed", 422, "Edge not allowed"),
    NotFoundError: ("not-found", 404, "Not found"),
    ContentExpiredError: ("content-expired", 410, "Content expired"),
    ContentErasedError: ("content-erased", 410, "Content erased"),
    TenantClosedError: ("tenant-deleted", 410, "Tenant deleted"),
    ConfirmationRequiredError: ("confirmation-required", 428, "Confirmation required"),
    ConflictError: ("conflict", 409, "Conflict"),
    IdempotencyKeyReusedError: ("idempotency-key-reused", 409, "Idempotency key reused"),
    EdgeExistsError: ("edge-exists", 409, "Edge exists"),
    ConcurrentWriteError: ("concurrent-write", 409, "Concurrent write"),
    AuthenticationError: ("unauthenticated", 401, "Unauthenticated"),
    PermissionDeniedError: ("forbidden", 403, "Forbidden"),
    ConfigurationError: ("misconfigured", 500, "Service misconfigured"),
    PgvectorMissingError: ("misconfigured", 500, "Service misconfigured"),
    SchemaTooNewError: ("misconfigured", 500, "Service misconfigured"),
    DataDirectoryInUseError: ("misconfigured", 500, "Service misconfigured"),
    DatabaseUnavailableError: ("database-unavailable", 503, "Database unavailable"),
    EmbedderUnavailableError: ("embedder-unavailable", 503, "Embedder unavailable"),
}

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


def _lookup(error: PalimpsestError) -> tuple[str, int, str]:
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


def install_problem_handlers(app: FastAPI) -> None:
    """Render every error as problem+json: ours, HTTP errors and validation errors."""

    async def palimpsest_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PalimpsestError)
        slug, status, title = _lookup(exc)
        if status >= 500:
            _log.error("request failed", extra={"path": request.url.path, "error": str(exc)})
            detail = str(exc) if status == 503 else "the service failed; see its log"
        else:
            detail = str(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if status == 503:
            headers = {"Retry-After": "5"}
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
        slug = _HTTP_SLUGS.get(exc.status_code, "http-error")
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 400 and "parsing the body" in detail:
            # FastAPI's answer to a body that is not UTF-8 (it decodes before parsing).
            slug, detail = "malformed-json", "the request body is not valid UTF-8 JSON"
        return problem_response(
            exc.status_code,
            slug,
            slug.replace("-", " ").capitalize(),
            detail,
            instance=request.url.path,
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

    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("unhandled error", extra={"path": request.url.path})
        return problem_response(
            500,
            "internal-error",
            "Internal error",
            "the service failed; see its log",
            instance=request.url.path,
        )

    app.add_exception_handler(PalimpsestError, palimpsest_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected_error)
