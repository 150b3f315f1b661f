"""The Python client of palimpsest's HTTP API: ``Client`` and ``AsyncClient``.

    from palimpsest.api.client import Client

    with Client("http://127.0.0.1:8000", token="pal_...") as client:
        created = client.create_memory("The deploy runs at 09:00", type="fact", scope="ops")
        belief = client.read_memory(created.id, wait=5)

Answers are the server's own response models (:mod:`palimpsest.api.schemas`); errors raise
one exception class per problem type (:mod:`palimpsest.api.client.errors`). See docs/client.md.

Modules:

- :mod:`palimpsest.api.client.aio`: ``AsyncClient``: the HTTP API from asyncio, method for
  method as ``Client``.
- :mod:`palimpsest.api.client.base`: What the synchronous and asynchronous clients share:
  settings, requests, answers.
- :mod:`palimpsest.api.client.calls`: Every endpoint of the HTTP API as a typed ``Call``,
  written once.
- :mod:`palimpsest.api.client.errors`: What the client raises: one exception class per RFC
  9457 problem ``type``.
- :mod:`palimpsest.api.client.langgraph_store`: A LangGraph ``BaseStore`` over the client
  (the ``palimpsest-memory[langgraph]`` extra; not imported here).
- :mod:`palimpsest.api.client.retries`: When a request is tried again, and after how long.
- :mod:`palimpsest.api.client.sse`: Reading Server-Sent Events, one line at a time.
- :mod:`palimpsest.api.client.sync`: ``Client``: the HTTP API from synchronous Python.
- :mod:`palimpsest.api.client.wire`: Reading a response body into the server's own response
  models.
"""

from __future__ import annotations

from palimpsest.api.client.aio import AsyncClient
from palimpsest.api.client.base import ObservationContent
from palimpsest.api.client.calls import Call, Evidence, Verdict
from palimpsest.api.client.errors import (
    PROBLEM_CLASSES,
    APIConnectionError,
    PalimpsestClientError,
    ProblemError,
    UnknownProblemError,
)
from palimpsest.api.client.retries import RetryPolicy
from palimpsest.api.client.sync import Client

__all__ = [
    "APIConnectionError",
    "AsyncClient",
    "Call",
    "Client",
    "Evidence",
    "ObservationContent",
    "PROBLEM_CLASSES",
    "PalimpsestClientError",
    "ProblemError",
    "RetryPolicy",
    "UnknownProblemError",
    "Verdict",
]
