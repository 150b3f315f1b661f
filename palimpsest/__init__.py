"""palimpsest: a memory service for LLM agents that remembers with provenance and
forgets on purpose.

The face an agent developer imports is the HTTP client, which needs only httpx
and pydantic (the base install)::

    from palimpsest import Client

    with Client("http://127.0.0.1:8080") as client:
        created = client.create_memory("Prefers dark mode", type="preference", scope="user")

The service itself lives in four rooms, installed with the ``server`` extra
(docs/architecture.md):

- :mod:`palimpsest.domain`: aggregates, events and pure policies.
- :mod:`palimpsest.projections`: the event store, commands, read models, recall,
  judgment, drains and history.
- :mod:`palimpsest.workers`: dramatiq actors for distributed drains.
- :mod:`palimpsest.api`: HTTP, MCP, the command line and the client.

The client is imported on first use of a name below, so ``import
palimpsest.domain`` in a server process loads no HTTP client. Besides the two
clients, the face names the roots of what they raise: ``PalimpsestClientError``
(anything), ``ProblemError`` (an error answer) and ``APIConnectionError`` (no
answer). The class of each problem type is imported from
:mod:`palimpsest.api.client`: it bears the name of the server's error class
(``NotFoundError``, ``ConflictError``...), which ``palimpsest.NotFoundError``
would leave ambiguous.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from palimpsest.api.client import (
        APIConnectionError,
        AsyncClient,
        Client,
        PalimpsestClientError,
        ProblemError,
    )

__all__ = [
    "APIConnectionError",
    "AsyncClient",
    "Client",
    "PalimpsestClientError",
    "ProblemError",
    "__version__",
]

_CLIENT_NAMES = frozenset(
    {"APIConnectionError", "AsyncClient", "Client", "PalimpsestClientError", "ProblemError"}
)

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # PEP 562: the client's names resolve on first use (see the docstring).
    if name in _CLIENT_NAMES:
        from palimpsest.api import client

        return getattr(client, name)
    msg = f"module 'palimpsest' has no attribute {name!r}"
    raise AttributeError(msg)
