"""How many HTTP connections this serving process has open, as uvicorn counts them.

A write runs on the event loop only while its connection is the process's one
open connection (:func:`palimpsest.api.worker_threads.in_thread_unless_alone`): with
HTTP/1.1, one connection carries one request at a time, so no other request
of this process can then be waiting for the loop. Uvicorn keeps the set of
its connections (``ServerState.connections``) but hands the app no way to
it; :class:`CountedHttpProtocol`, uvicorn's own ``httptools`` protocol given
as ``serve``'s ``http`` class, notes that set where :func:`open_connections`
finds it. An app served any other way (tests' in-process clients) never
counts one connection, and so never writes on its loop.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

__all__ = ["CountedHttpProtocol", "PROTOCOL", "open_connections"]

PROTOCOL = "palimpsest.api.connections:CountedHttpProtocol"
"""The ``http`` argument that gives uvicorn this protocol (its workers import it)."""

_served: list[ServerState] = []
"""The state of the server whose protocol this process runs (one a process)."""


class CountedHttpProtocol(HttpToolsProtocol):
    """Uvicorn's ``httptools`` protocol, which also lets :func:`open_connections` see
    its server's connections (the same set: an upgraded websocket stays in it)."""

    def __init__(self, config: Any, server_state: ServerState, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, server_state, *args, **kwargs)
        if not _served or _served[0] is not server_state:
            _served[:] = [server_state]


def open_connections() -> int | None:
    """Return how many connections this process's server has open (the caller's
    among them), or None when no server of :class:`CountedHttpProtocol` has
    served one."""
    return len(_served[0].connections) if _served else None
