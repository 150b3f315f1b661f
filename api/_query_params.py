"""Unknown query parameters: refused with 400 problem+json, never ignored.

A misspelt filter (``?projet=x``) that is silently ignored answers a
different question than the one asked, so every route refuses a query
parameter it does not declare. Applied app-wide as a dependency: the names
a route declares are read from its dependency tree (its own parameters and
those of the dependencies it uses), a walk of a few nodes per request.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from palimpsest.domain.errors import InvalidInputError

__all__ = ["UnknownQueryParameterError", "declared_query_names", "refuse_unknown_query"]


class UnknownQueryParameterError(InvalidInputError):
    """A query parameter the route does not declare (400 ``unknown-query-parameter``)."""


def declared_query_names(dependant: Dependant) -> frozenset[str]:
    """Return the query parameter names ``dependant`` and its dependencies declare."""
    names: set[str] = set()
    pending = [dependant]
    while pending:
        current = pending.pop()
        names.update(field.alias for field in current.query_params)
        pending.extend(current.dependencies)
    return frozenset(names)


async def refuse_unknown_query(request: Request) -> None:
    """Refuse a request whose query names a parameter its route does not declare.

    Async (it does no I/O): every request runs it, and a synchronous dependency
    costs a hop to a worker thread and back.

    Raises:
        UnknownQueryParameterError: naming every unknown parameter.
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = declared_query_names(route.dependant)
    unknown = sorted(set(request.query_params.keys()) - known)
    if unknown:
        accepted = ", ".join(sorted(known)) or "none"
        msg = f"unknown query parameter(s): {', '.join(unknown)} (this route accepts: {accepted})"
        raise UnknownQueryParameterError(msg)
