"""What the client raises: one exception class per RFC 9457 problem ``type``, in the
tree of the service's own error classes.

The service answers every error as ``application/problem+json`` with ``type``
``urn:palimpsest:problem:<slug>`` (docs/api.md, "Errors"). :func:`problem_error`
turns such a response into the class registered for its slug, so callers branch
with ``except NotFoundError`` instead of on status codes or detail text. Where the
service raises an error class for a slug, the client's class has its name and its
place in the tree (``palimpsest.domain.errors`` draws it), so ``except
ConflictError`` catches every conflict (a stale proposal, an edge that exists...)
as it does on the server::

    PalimpsestClientError                anything the client raises on purpose
    ├── APIConnectionError               no answer, after the retries
    └── ProblemError                     an error answer (status, type, body, headers)
        ├── UnknownProblemError          a type this client does not know, or no problem
        ├── PalimpsestError              internal-error; base of the service's errors
        │   ├── InvalidInputError        invalid-input
        │   │   ├── UnknownQueryParameterError, RepeatedHeaderError
        │   │   ├── ContentTooLargeError
        │   │   └── EvidenceOutOfRangeError, EvidenceRetractedError,
        │   │       EvidenceErasedError, EdgeNotAllowedError
        │   ├── NotFoundError, ContentExpiredError, ContentErasedError
        │   ├── TenantClosedError        tenant-deleted
        │   ├── ConfirmationRequiredError
        │   ├── ConflictError            conflict
        │   │   └── IdempotencyKeyReusedError, EdgeExistsError,
        │   │       StructurallyArchivedError, MemoryForgottenError,
        │   │       MemorySupersededError, AlreadySettledError, StaleProposalError,
        │   │       CollapseGuardError, PassDisabledError, ProposalClosedError,
        │   │       ConcurrentWriteError, MemoryUnprojectableError
        │   ├── AuthenticationError      unauthenticated
        │   ├── PermissionDeniedError    forbidden
        │   ├── ConfigurationError       misconfigured
        │   └── DatabaseUnavailableError, EmbedderUnavailableError,
        │       JudgeUnavailableError, ConcurrencyLimitError
        └── HttpError, MalformedJsonError, MalformedRequestError,
            MethodNotAllowedError, UnsupportedMediaTypeError, ValidationError,
            NotReadyError, NotAliveError HTTP's own refusals (the slug in CamelCase)

A request that never got an answer (after its retries) raises
:class:`APIConnectionError`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    import httpx2


__all__ = [
    "APIConnectionError",
    "AlreadySettledError",
    "AuthenticationError",
    "CollapseGuardError",
    "ConcurrencyLimitError",
    "ConcurrentWriteError",
    "ConfigurationError",
    "ConfirmationRequiredError",
    "ConflictError",
    "ContentErasedError",
    "ContentExpiredError",
    "ContentTooLargeError",
    "DatabaseUnavailableError",
    "DuplicateKeyError",
    "EdgeExistsError",
    "EdgeNotAllowedError",
    "EmbedderUnavailableError",
    "EvidenceErasedError",
    "EvidenceOutOfRangeError",
    "EvidenceRetractedError",
    "HttpError",
    "IdempotencyKeyReusedError",
    "InconsistentPolicyError",
    "InvalidInputError",
    "InvalidTenantNameError",
    "ItemsChangedError",
    "JsonTooDeepError",
    "JudgeUnavailableError",
    "MalformedJsonError",
    "MalformedRequestError",
    "MemoryForgottenError",
    "MemorySupersededError",
    "MemoryUnprojectableError",
    "MethodNotAllowedError",
    "NotAliveError",
    "NotFoundError",
    "NotReadyError",
    "PROBLEM_CLASSES",
    "PROBLEM_TYPE_PREFIX",
    "PalimpsestClientError",
    "PalimpsestError",
    "PassDisabledError",
    "PermissionDeniedError",
    "ProblemError",
    "ProposalClosedError",
    "RepeatedHeaderError",
    "ResolutionNotApplicableError",
    "StaleProposalError",
    "StructurallyArchivedError",
    "TenantClosedError",
    "UnknownProblemError",
    "UnknownQueryParameterError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "problem_error",
]

PROBLEM_TYPE_PREFIX = "urn:palimpsest:problem:"


class PalimpsestClientError(Exception):
    """Raised for anything the client raises on purpose."""


class APIConnectionError(PalimpsestClientError):
    """Raised when a request got no answer (connection refused, reset or timed out),
    retries included; a write sent with an ``Idempotency-Key`` may be retried with the
    same key safely."""


class ProblemError(PalimpsestClientError):
    """Raised for an error answer of the service: the problem document and the
    response's headers.

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
    """Raised for an error answer whose type this client does not know, or that is not
    a problem document (then ``body`` holds ``{"detail": <the text>}``)."""


_P = TypeVar("_P", bound=type[ProblemError])


def _problem(slug: str) -> Callable[[_P], _P]:
    def register(cls: _P) -> _P:
        cls.slug = slug
        PROBLEM_CLASSES[slug] = cls
        return cls

    return register


PROBLEM_CLASSES: dict[str, type[ProblemError]] = {}
"""Each problem slug the service answers, and its class."""


# The service's own errors: the tree of palimpsest.domain.errors (and of the
# errors other rooms add to it), one class per problem type.


@_problem("internal-error")
class PalimpsestError(ProblemError):
    """Raised for every failure the service itself detected (each class below); this
    class itself for a 500 ``internal-error``: the service failed (see its log)."""


@_problem("invalid-input")
class InvalidInputError(PalimpsestError):
    """Raised when a value breaks a rule the OpenAPI document cannot state (422
    ``invalid-input``), and for each more specific refusal below."""


@_problem("malformed-json")
class MalformedJsonError(InvalidInputError):
    """Raised when the body is not strict JSON (400): not UTF-8, a byte-order mark,
    ``NaN``, or not JSON at all; and for each more specific refusal below."""


@_problem("inconsistent-policy")
class InconsistentPolicyError(InvalidInputError):
    """Raised when a forgetting policy's values are each valid but contradict each other
    (422), as ``prune_below`` above ``fade_below``."""


@_problem("invalid-tenant-name")
class InvalidTenantNameError(InvalidInputError):
    """Raised when a name cannot name a tenant (422): invisible or bidirectional
    controls, mixed scripts, blank, or shaped like an id."""


@_problem("unknown-query-parameter")
class UnknownQueryParameterError(InvalidInputError):
    """Raised when the route declares no such query parameter (400)."""


@_problem("repeated-header")
class RepeatedHeaderError(InvalidInputError):
    """Raised when a header that may appear once (``Authorization``) appeared twice (400)."""


@_problem("content-too-large")
class ContentTooLargeError(InvalidInputError):
    """Raised when content or the request body exceeds its limit (413)."""


@_problem("evidence-out-of-range")
class EvidenceOutOfRangeError(InvalidInputError):
    """Raised when evidence offsets fall outside the observation (422)."""


@_problem("evidence-retracted")
class EvidenceRetractedError(InvalidInputError):
    """Raised when evidence cites an observation retracted as evidence (422)."""


@_problem("evidence-erased")
class EvidenceErasedError(InvalidInputError):
    """Raised when evidence cites an erased observation (422)."""


@_problem("edge-not-allowed")
class EdgeNotAllowedError(InvalidInputError):
    """Raised when an edge kind is not allowed between the two memories (422)."""


@_problem("not-found")
class NotFoundError(PalimpsestError):
    """Raised for an unknown id, or another tenant's (404)."""


@_problem("content-expired")
class ContentExpiredError(PalimpsestError):
    """Raised when the observation's retention deadline has passed (410)."""


@_problem("content-erased")
class ContentErasedError(PalimpsestError):
    """Raised when an erasure removed the content (410); ``body["erasure"]`` names it."""


@_problem("tenant-deleted")
class TenantClosedError(PalimpsestError):
    """Raised when the tenant's deletion was requested (410 ``tenant-deleted``);
    ``body["erasure"]`` names the deletion."""


@_problem("confirmation-required")
class ConfirmationRequiredError(PalimpsestError):
    """Raised when a destructive request lacks its current confirmation (428)."""

    @property
    def confirmation_token(self) -> str:
        """Pass it back as ``confirm`` to confirm the request."""
        return str(self.body.get("confirmation_token", ""))


@_problem("conflict")
class ConflictError(PalimpsestError):
    """Raised when the request contradicts what is recorded (409 ``conflict``), and for
    each more specific conflict below."""


@_problem("idempotency-key-reused")
class IdempotencyKeyReusedError(ConflictError):
    """Raised when the ``Idempotency-Key`` was used before with a different request (409)."""


@_problem("edge-exists")
class EdgeExistsError(ConflictError):
    """Raised when the same edge was already added (409)."""


@_problem("structurally-archived")
class StructurallyArchivedError(ConflictError):
    """Raised when restore is asked of a memory archived by a ``supersedes`` edge (409)."""


@_problem("memory-forgotten")
class MemoryForgottenError(ConflictError):
    """Raised when a forgotten memory is revised or settled without being restored
    first (409)."""


@_problem("memory-superseded")
class MemorySupersededError(ConflictError):
    """Raised when a superseded memory is revised or settled without being restored
    first (409)."""


@_problem("memory-unprojectable")
class MemoryUnprojectableError(ConflictError):
    """Raised when a memory is quarantined because one of its events cannot be read by
    the service; erasing it is what is left (409)."""


@_problem("already-settled")
class AlreadySettledError(ConflictError):
    """Raised when a potential conflict between two memories is settled again,
    differently (409)."""


@_problem("items-changed")
class ItemsChangedError(ConflictError):
    """Raised when verdicts name items by ref and the items to judge changed since the
    listing they were read from (409): list them again."""


@_problem("resolution-not-applicable")
class ResolutionNotApplicableError(ConflictError):
    """Raised when a resolution is given for a proposal that is not a conflict (409)."""


@_problem("stale-proposal")
class StaleProposalError(ConflictError):
    """Raised when a memory of the proposal changed since its verdict (409)."""


@_problem("collapse-guard")
class CollapseGuardError(ConflictError):
    """Raised when the day's archival share is used up (409; an admin may
    ``confirm_bulk``)."""


@_problem("pass-disabled")
class PassDisabledError(ConflictError):
    """Raised when the deployment runs no forgetting pass (409)."""


@_problem("proposal-closed")
class ProposalClosedError(ConflictError):
    """Raised when the proposal is not open (409)."""


@_problem("concurrent-write")
class ConcurrentWriteError(ConflictError):
    """Raised when other writers kept changing the same memory (409); retry."""


@_problem("unauthenticated")
class AuthenticationError(PalimpsestError):
    """Raised for no token, a malformed one or an unknown one (401 ``unauthenticated``)."""


@_problem("forbidden")
class PermissionDeniedError(PalimpsestError):
    """Raised when the token's role cannot do this (403 ``forbidden``)."""


@_problem("misconfigured")
class ConfigurationError(PalimpsestError):
    """Raised when the deployment is misconfigured (500 ``misconfigured``: settings,
    pgvector, schema, data directory)."""


@_problem("database-unavailable")
class DatabaseUnavailableError(PalimpsestError):
    """Raised when PostgreSQL cannot be reached (503)."""


@_problem("embedder-unavailable")
class EmbedderUnavailableError(PalimpsestError):
    """Raised when the embedding model could not be loaded or its endpoint failed (503)."""


@_problem("judge-unavailable")
class JudgeUnavailableError(PalimpsestError):
    """Raised when the forgetting pass's judge could not be reached (502)."""


@_problem("concurrency-limit")
class ConcurrencyLimitError(PalimpsestError):
    """Raised when the token or tenant holds as many streams or waits as allowed (429)."""


# Refusals of HTTP itself, before any route ran: no error class of the service.


@_problem("http-error")
class HttpError(ProblemError):
    """Raised for an HTTP-level refusal without a more specific type."""


@_problem("duplicate-key")
class DuplicateKeyError(MalformedJsonError):
    """Raised when an object in the body names a key twice (400)."""


@_problem("json-too-deep")
class JsonTooDeepError(MalformedJsonError):
    """Raised when the body nests deeper than the service's depth limit (400)."""


@_problem("malformed-request")
class MalformedRequestError(ProblemError):
    """Raised for a request HTTP itself refuses before any route reads it (400)."""


@_problem("method-not-allowed")
class MethodNotAllowedError(ProblemError):
    """Raised when the path exists, not with this method (405)."""


@_problem("unsupported-media-type")
class UnsupportedMediaTypeError(ProblemError):
    """Raised when the body's media type is not one the route reads (415)."""


@_problem("validation-error")
class ValidationError(ProblemError):
    """Raised when a field has the wrong type or form (422)."""

    @property
    def errors(self) -> list[dict[str, str]]:
        """``{pointer, message}`` per invalid field."""
        return list(self.body.get("errors", []))


@_problem("not-ready")
class NotReadyError(ProblemError):
    """Raised by ``/readyz`` when the process cannot serve yet (503)."""


@_problem("not-alive")
class NotAliveError(ProblemError):
    """Raised by ``/healthz`` when ``serve`` gave up restarting its embedded PostgreSQL (503)."""


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
