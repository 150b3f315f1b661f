"""The one place that reads FastAPI's private state: the route an inclusion made.

What it uses: ``fastapi.routing._effective_route_context_var``, the context
variable FastAPI sets while it builds the handler of a route copied into an
``include_router`` (FastAPI 0.165-0.169), and the ``original_route`` of the
context it holds (FastAPI's ``_EffectiveRouteContext``: the inclusion's
dependencies, prefix and response class joined to the route's).
``APIRoute.get_route_handler`` itself reads it there, and gives a subclass no
other way to it.

Why: :class:`~palimpsest.api._plain_requests.PlainRoute` answers plain requests
without FastAPI's dependency solving, a third of the event loop's time per write
(docs/benchmarks.md, "Plain requests without FastAPI's dependency solving":
+21-43% writes/s for one client, +9-48% for eight). It must see the
dependencies an inclusion adds, or it would skip them in silence.

What breaks if FastAPI changes it: the import fails (the app does not start),
or the variable is no longer set while a handler is built, and
:func:`included_route` returns the bare route: the plain path would then miss
an inclusion's dependencies. ``tests/contracts/test_fastapi_internals.py``
fails on either.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import _effective_route_context_var

__all__ = ["included_route"]


def included_route(route: Any) -> Any:
    """Return what FastAPI is building ``route``'s handler for: the inclusion's copy
    of it (its dependencies, path and response class as included) while
    ``include_router`` builds it, else ``route`` itself.

    Call it only from ``get_route_handler``, where FastAPI sets what it reads.
    """
    included = _effective_route_context_var.get()
    return included if included is not None and included.original_route is route else route
