"""FastAPI's internals behind :mod:`palimpsest.api._fastapi_internals` still tell a route
class what an inclusion made of its route, as ``PlainRoute`` relies on: the
inclusion's dependencies, its prefix, the same original route.

It drives a real ``include_router`` through FastAPI's routing, then names what is
used, so that an upgrade that changes either fails here."""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from typing import Any

import fastapi.routing
from fastapi import APIRouter, Depends, FastAPI
from fastapi.testclient import TestClient

from palimpsest.api._fastapi_internals import included_route

_seen: list[tuple[Any, Any]] = []
"""(the route, what :func:`included_route` returned) each time a handler was built."""


class _Recording(fastapi.routing.APIRoute):
    def get_route_handler(self) -> Any:
        _seen.append((self, included_route(self)))
        return super().get_route_handler()


def _from_the_inclusion() -> str:
    return "included"


def test_a_route_class_building_an_included_handler_sees_the_inclusions_route() -> None:
    # Given a route declared on a router, and that router included with a
    # prefix and a dependency of the inclusion's own
    _seen.clear()
    router = APIRouter(route_class=_Recording)

    @router.get("/thing")
    async def thing() -> dict[str, str]:
        return {"ok": "yes"}

    (declared,) = router.routes
    app = FastAPI()
    app.include_router(router, prefix="/v9", dependencies=[Depends(_from_the_inclusion)])

    # When a request routes to it (FastAPI builds an included handler then, or earlier)
    with TestClient(app) as client:
        assert client.get("/v9/thing").json() == {"ok": "yes"}

    # Then building the declared route's own handler saw the route itself, and
    # building the inclusion's saw the inclusion's copy of the same route
    assert (declared, declared) in _seen
    included = [found for route, found in _seen if route is declared and found is not declared]
    assert included, _seen
    copy = included[0]
    assert copy.original_route is declared
    assert copy.path == "/v9/thing"
    assert [d.call for d in copy.dependant.dependencies] == [_from_the_inclusion]


def test_the_internals_keep_their_names() -> None:
    assert isinstance(fastapi.routing._effective_route_context_var, ContextVar)
    # APIRoute builds its handler from what that variable holds: the only way a
    # route class can see its inclusion (none when FastAPI passes it another way).
    source = inspect.getsource(fastapi.routing.APIRoute.get_route_handler)
    assert "_effective_route_context_var.get()" in source
    assert "original_route" in source
