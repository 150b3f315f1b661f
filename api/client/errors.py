"""What the client raises: one exception class per RFC 9457 problem ``type``.

The service answers every error as ``application/problem+json`` with ``type``
``urn:palimpsest:problem:<slug>`` (docs/api.md, "Errors"). :func:`problem_error`
turns such a response into the class registered for its slug (its name is the
slug in CamelCase, ending in ``Error``), so callers branch with ``except
NotFoundError`` instead of on status codes or detail text. A problem type this
client does not know, or an error response that is not a problem document,
raises :class:`UnknownProblemError`; a request that never got an answer (after
its retries) raises :class:`APIConnectionError`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import httpx2

__all__ = [
    "APIConnectionError",
    "CollapseGuardError",
    "ConcurrencyLimitError",
    "ConcurrentWriteError",
    "ConfirmationRequiredError",
    "ConflictError",
    "ContentErasedError",
    "ContentExpiredError",
    "ContentTooLargeError",
    "DatabaseUnavailableError",
    "EdgeExistsError",
    "EdgeNotAllowedError",
    "EmbedderUnavailableError",
    "EvidenceErasedError",
    "EvidenceOutOfRangeError",
    "EvidenceRetractedError",
    "ForbiddenError",
    "HttpError",
    "IdempotencyKeyReusedError",
    "InternalError",
    "InvalidInputError",
    "JudgeUnavailableError",
    "MalformedJsonError",
    "MalformedRequestError",
    "MethodNotAllowedError",
    "MisconfiguredError",
    "NotFoundError",
    "NotReadyError",
    "PROBLEM_CLASSES",
    "PROBLEM_TYPE_PREFIX",
    "PalimpsestClientError",
    "PassDisabledError",
    "ProblemError",
    "ProposalClosedError",
    "RepeatedHeaderError",
    "StaleProposalError",
    "StructurallyArchivedError",
    "TenantDeletedError",
    "UnauthenticatedError",
    "UnknownProblemError",
    "UnknownQueryParameterError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "problem_error",
]

PROBLEM_TYPE_PREFIX = "urn:palimpsest:problem:"


class PalimpsestClientError(Exception):
    """Anything the client raises on purpose."""


class APIConnectionError(PalimpsestClientError):
    """The request got no answer (connection refused, reset or timed out), retries
    included; a write sent with an ``Idempotency-Key`` may be retried with the same
    key safely."""


class ProblemError(PalimpsestClientError):
    """An error answer of the service: the problem document and the response's headers.

    ``slug`` is the class's problem type (``type`` without its URN prefix). ``body``
    is the whole document, extension members included (``errors``, ``erasure``,
    ``confirmation_token``, ``checks``...)."""

    slug: ClassVar[str] = ""

    def __init__(self, status: int, body: dict[str, Any], headers: httpx2.Headers) -> None:
        self.status = status
        self.body = body
        self.headers = headers
        self.type: str = str(body.get("type", ""))
        self.title: str = str(body.get("title", ""))
        self.detail: str = str(body.get("detail", ""))
        self.instance: str | None = body.get("instance")
        super().__init__(f"{status} {self.type or 'error'}: {self.detail}")

    @property
    def retry_after(self) -> str | None:
        """The answer's ``Retry-After`` header, as sent (seconds or an HTTP date)."""
        return self.headers.get("retry-after")


class UnknownProblemError(ProblemError):
    """An error answer whose type this client does not know, or that is not a problem
    document (then ``body`` holds ``{"detail": <the text>}``)."""


def _problem(slug: str) -> Any:
    def register(cls: type[ProblemError]) -> type[ProblemError]:
        cls.slug = slug
        PROBLEM_CLASSES[slug] = cls
        return cls

    return register


PROBLEM_CLASSES: dict[str, type[ProblemError]] = {}
"""Each problem slug the service answers, and its class."""


@_problem("internal-error")
class InternalError(ProblemError):
    """500: the service failed (see its log)."""


@_problem("misconfigured")
class MisconfiguredError(ProblemError):
    """500: the deployment is misconfigured (settings, pgvector, schema, data directory)."""


@_problem("http-error")
class HttpError(ProblemError):
    """An HTTP-level refusal without a more specific type."""


@_problem("malformed-json")
class MalformedJsonError(ProblemError):
    """400: the body is not JSON, or not UTF-8."""


@_problem("malformed-request")
class MalformedRequestError(ProblemError):
    """400: a request HTTP itself refuses before any route reads it."""


@_problem("unknown-query-parameter")
class UnknownQueryParameterError(ProblemError):
    """400: the route declares no such query parameter."""


@_problem("repeated-header")
class RepeatedHeaderError(ProblemError):
    """400: a header that may appear once (``Authorization``) appeared twice."""


@_problem("unauthenticated")
class UnauthenticatedError(ProblemError):
    """401: no token, a malformed one or an unknown one."""


@_problem("forbidden")
class ForbiddenError(ProblemError):
    """403: the token's role cannot do this."""


@_problem("not-found")
class NotFoundError(ProblemError):
    """404: an unknown id, or another tenant's."""


@_problem("method-not-allowed")
class MethodNotAllowedError(ProblemError):
    """405: the path exists, not with this method."""


@_problem("conflict")
class ConflictError(ProblemError):
    """409: the request contradicts what is recorded."""


@_problem("idempotency-key-reused")
class IdempotencyKeyReusedError(ProblemError):
    """409: the ``Idempotency-Key`` was used before with a different request."""


@_problem("edge-exists")
class EdgeExistsError(ProblemError):
    """409: the same edge was already added."""


@_problem("structurally-archived")
class StructurallyArchivedError(ProblemError):
    """409: restore asked of a memory archived by a ``supersedes`` edge."""


@_problem("stale-proposal")
class StaleProposalError(ProblemError):
    """409: a memory of the proposal changed since its verdict."""


@_problem("collapse-guard")
class CollapseGuardError(ProblemError):
    """409: the day's archival share is used up (an admin may ``confirm_bulk``)."""


@_problem("pass-disabled")
class PassDisabledError(ProblemError):
    """409: the deployment runs no forgetting pass."""


@_problem("proposal-closed")
class ProposalClosedError(ProblemError):
    """409: the proposal is not open."""


@_problem("concurrent-write")
class ConcurrentWriteError(ProblemError):
    """409: other writers kept changing the same memory; retry."""


@_problem("content-expired")
class ContentExpiredError(ProblemError):
    """410: the observation's retention deadline has passed."""


@_problem("content-erased")
class ContentErasedError(ProblemError):
    """410: an erasure removed the content; ``body["erasure"]`` names it."""


@_problem("tenant-deleted")
class TenantDeletedError(ProblemError):
    """410: the tenant's deletion was requested; ``body["erasure"]`` names it."""


@_problem("content-too-large")
class ContentTooLargeError(ProblemError):
    """413: content or the request body exceeds its limit."""


@_problem("unsupported-media-type")
class UnsupportedMediaTypeError(ProblemError):
    """415: the body's media type is not one the route reads."""


@_problem("validation-error")
class ValidationError(ProblemError):
    """422: a field has the wrong type or form."""

    @property
    def errors(self) -> list[dict[str, str]]:
        """``{pointer, message}`` per invalid field."""
        return list(self.body.get("errors", []))


@_problem("invalid-input")
class InvalidInputError(ProblemError):
    """422: a value breaks a rule the OpenAPI document cannot state."""


@_problem("evidence-out-of-range")
class EvidenceOutOfRangeError(ProblemError):
    """422: evidence offsets outside the observation."""


@_problem("evidence-retracted")
class EvidenceRetractedError(ProblemError):
    """422: evidence cites an observation retracted as evidence."""


@_problem("evidence-erased")
class EvidenceErasedError(ProblemError):
    """422: evidence cites an erased observation."""


@_problem("edge-not-allowed")
class EdgeNotAllowedError(ProblemError):
    """422: an edge kind not allowed between the two memories."""


@_problem("confirmation-required")
class ConfirmationRequiredError(ProblemError):
    """428: a destructive request without its current confirmation."""

    @property
    def confirmation_token(self) -> str:
        """Pass it back as ``confirm`` to confirm the request."""
        return str(self.body.get("confirmation_token", ""))


@_problem("concurrency-limit")
class ConcurrencyLimitError(ProblemError):
    """429: the token or tenant holds as many streams or waits as allowed."""


@_problem("judge-unavailable")
class JudgeUnavailableError(ProblemError):
    """502: the forgetting pass's judge could not be reached."""


@_problem("database-unavailable")
class DatabaseUnavailableError(ProblemError):
    """503: PostgreSQL cannot be reached."""


@_problem("embedder-unavailable")
class EmbedderUnavailableError(ProblemError):
    """503: the embedding model could not be loaded or its endpoint failed."""


@_problem("not-ready")
class NotReadyError(ProblemError):
    """503 from ``/readyz``: the process cannot serve yet."""


def problem_error(response: httpx2.Response) -> ProblemError:
    """Return the exception of an error ``response`` (status 400 or more)."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        body = {"status": response.status_code, "detail": response.text}
    kind = str(body.get("type", ""))
    slug = kind.removeprefix(PROBLEM_TYPE_PREFIX) if kind.startswith(PROBLEM_TYPE_PREFIX) else ""
    cls = PROBLEM_CLASSES.get(slug, UnknownProblemError)
    return cls(response.status_code, body, response.headers)
