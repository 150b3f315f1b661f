"""The Python client of palimpsest's HTTP API: ``Client`` and ``AsyncClient``.

    from palimpsest.api.client import Client

    with Client("http://127.0.0.1:8000", token="pal_...") as client:
        created = client.create_memory("The deploy runs at 09:00", type="fact", scope="ops")
        belief = client.read_memory(created.id, wait=5)

It needs httpx2 and pydantic only, none of the server: answers are the client's
own models (:mod:`palimpsest.api.client.models`, :mod:`palimpsest.api.client._beliefs`,
:mod:`palimpsest.api.client._records`), held to the server's OpenAPI document by a
test; errors raise one exception class per problem type, in the tree of the
server's error classes (:mod:`palimpsest.api.client.errors`), all exported here.
See docs/client.md.

Modules:

- :mod:`palimpsest.api.client._aio`: ``AsyncClient``: the HTTP API from asyncio, method for
  method as ``Client``.
- :mod:`palimpsest.api.client._base`: What the synchronous and asynchronous clients share:
  settings, requests, answers.
- :mod:`palimpsest.api.client._beliefs`: What the service believes about memories: one
  memory's belief, listings, reads by id, and recall.
- :mod:`palimpsest.api.client._calls`: Every endpoint of the HTTP API as a typed ``Call``,
  written once.
- :mod:`palimpsest.api.client.errors`: What the client raises: one exception class per RFC
  9457 problem ``type``, in the tree of the service's error classes.
- :mod:`palimpsest.api.client.langgraph_store`: A LangGraph ``BaseStore`` over the client
  (the ``palimpsest-memory[langgraph]`` extra; not imported here).
- :mod:`palimpsest.api.client.models`: The answers of writes, of the tenant's settings and
  of the forgetting pass, and what every answer model shares.
- :mod:`palimpsest.api.client._records`: What the log records: observations, versions,
  histories, the event feed, decisions, erasure receipts.
- :mod:`palimpsest.api.client._retries`: When a request is tried again, and after how long.
- :mod:`palimpsest.api.client._sse`: Reading Server-Sent Events, one line at a time.
- :mod:`palimpsest.api.client._sync`: ``Client``: the HTTP API from synchronous Python.
"""

from __future__ import annotations

from palimpsest.api.client._aio import AsyncClient
from palimpsest.api.client._base import ObservationContent
from palimpsest.api.client._calls import Call, Evidence, Verdict
from palimpsest.api.client._retries import RetryPolicy
from palimpsest.api.client._sync import Client
from palimpsest.api.client.errors import (
    PROBLEM_CLASSES,
    AlreadySettledError,
    APIConnectionError,
    AuthenticationError,
    CollapseGuardError,
    ConcurrencyLimitError,
    ConcurrentWriteError,
    ConfigurationError,
    ConfirmationRequiredError,
    ConflictError,
    ContentErasedError,
    ContentExpiredError,
    ContentTooLargeError,
    DatabaseUnavailableError,
    DuplicateKeyError,
    EdgeExistsError,
    EdgeNotAllowedError,
    EmbedderUnavailableError,
    EvidenceErasedError,
    EvidenceOutOfRangeError,
    EvidenceRetractedError,
    HttpError,
    IdempotencyKeyReusedError,
    InconsistentPolicyError,
    InvalidInputError,
    InvalidTenantNameError,
    ItemsChangedError,
    JsonTooDeepError,
    JudgeUnavailableError,
    MalformedJsonError,
    MalformedRequestError,
    MemoryForgottenError,
    MemorySupersededError,
    MemoryUnprojectableError,
    MethodNotAllowedError,
    NotAliveError,
    NotFoundError,
    NotReadyError,
    PalimpsestClientError,
    PalimpsestError,
    PassDisabledError,
    PermissionDeniedError,
    ProblemError,
    ProposalClosedError,
    RepeatedHeaderError,
    ResolutionNotApplicableError,
    StaleProposalError,
    StructurallyArchivedError,
    TenantClosedError,
    UnknownProblemError,
    UnknownQueryParameterError,
    UnsupportedMediaTypeError,
    ValidationError,
)

__all__ = [
    "APIConnectionError",
    "AlreadySettledError",
    "AsyncClient",
    "AuthenticationError",
    "Call",
    "Client",
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
    "Evidence",
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
    "ObservationContent",
    "PROBLEM_CLASSES",
    "PalimpsestClientError",
    "PalimpsestError",
    "PassDisabledError",
    "PermissionDeniedError",
    "ProblemError",
    "ProposalClosedError",
    "RepeatedHeaderError",
    "ResolutionNotApplicableError",
    "RetryPolicy",
    "StaleProposalError",
    "StructurallyArchivedError",
    "TenantClosedError",
    "UnknownProblemError",
    "UnknownQueryParameterError",
    "UnsupportedMediaTypeError",
    "ValidationError",
    "Verdict",
]
