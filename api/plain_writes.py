"""Plain writes answered without FastAPI's dependency solving.

Solving a write route's dependencies (the caller, its role, the
``Idempotency-Key``, the admission holder, the query) and checking its answer
against the response model took about a third of the event loop's time per
write (docs/benchmarks.md). For a *plain* request every one of those values is
known at a glance, so :class:`PlainWriteRoute` builds them with the functions
the dependencies call and calls the same endpoint. Every other request goes to
FastAPI's own handler, which answers it as before, with the body already read.

A request is plain when it has no query string, one ``Authorization: Bearer``
header whose token this process verified lately (the tenant open), a role that
may perform the route's writes, at most one well-formed ``Idempotency-Key``,
``Content-Type: application/json`` exactly, path ids that are UUIDs, and a body
that is valid JSON the route's model accepts; and the app overrides no
dependency (tests that do get FastAPI's handler). Whatever is not plain is
where a problem answer comes from, so every refusal is still FastAPI's and the
exception handlers' (:mod:`api.problems`); an error the endpoint raises goes to
the same handlers by the same route wrapper.

Only the values are built here: the endpoint, the response model's
serialisation (:func:`fastapi.routing.serialize_response`), the middlewares and
the exception handlers are the ones every request goes through.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from fastapi import Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.routing import (
    APIRoute,
    APIRouter,
    _effective_route_context_var,
    serialize_response,
)
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import BaseModel, TypeAdapter

from api.admission import get_holder
from api.deps import get_idempotency_key, get_write, recently_verified, write_request
from api.query_params import refuse_unknown_query
from api.specs import RoleCheck
from domain.errors import PalimpsestError

__all__ = ["PlainWriteRoute", "SKIPPED_WITHOUT_QUERY", "plain_write_post"]

_UUID: TypeAdapter[UUID] = TypeAdapter(UUID)

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class PlainWriteRoute(APIRoute):
    """An ``APIRoute`` (FastAPI's documented extension point) whose handler answers
    a plain write itself and gives any other request to FastAPI's.

    The endpoint must be async and take nothing but: path ids typed ``UUID``;
    one body, a pydantic model, not embedded; the write (``WriteDep``); the
    admission holder (``HolderDep``); and query parameters with defaults. The
    route, its routers and the app may add role checks (:func:`api.specs.requires`)
    and :func:`~api.query_params.refuse_unknown_query`. Anything else raises
    ``TypeError`` where FastAPI builds the handler (for the route's own, when it
    is declared; for what an ``include_router`` or the app adds, when FastAPI
    first routes to it), so that nothing is ever skipped here in silence.
    """

    def get_route_handler(self) -> Handler:
        full = super().get_route_handler()
        # As APIRoute.get_route_handler finds what an inclusion added (FastAPI 0.165):
        # the app's and the include's dependencies, its response class, its prefix.
        included = _effective_route_context_var.get()
        route = included if included is not None and included.original_route is self else self
        plan = _plan_of(route)

        async def handler(request: Request) -> Response:
            values = await _plain_values(plan, request)
            if values is None:
                return await full(request)
            return await _answer(plan, values)

        return handler


SKIPPED_WITHOUT_QUERY: tuple[Callable[..., Any], ...] = (refuse_unknown_query,)
"""The dependencies a plain request (it has no query string) has no use for."""


@dataclass(frozen=True)
class _Plan:
    """What a route's plain requests need, checked once: its parameters by role."""

    route: Any
    """The route as included (an ``APIRoute``, or FastAPI's included copy of one)."""
    path_ids: tuple[tuple[str, str], ...]
    """Each path id's parameter name, and the name the path gives it."""
    body_name: str
    body_model: type[BaseModel]
    write_name: str
    holder_name: str
    role_checks: tuple[RoleCheck, ...]


def _refusal(route: Any, what: str) -> TypeError:
    return TypeError(f"PlainWriteRoute {route.path}: {what}")


def _plan_of(route: Any) -> _Plan:
    """Return the plan of ``route``; raise ``TypeError`` on what a plain request
    would have to skip or could not supply."""
    dependant, endpoint = route.dependant, route.endpoint
    if not inspect.iscoroutinefunction(endpoint):
        raise _refusal(route, "the endpoint must be async")
    if route.response_field is None or not isinstance(route.response_class, DefaultPlaceholder):
        raise _refusal(route, "it needs a response model and the default response class")
    if dependant.header_params or dependant.cookie_params or len(dependant.body_params) != 1:
        raise _refusal(route, "it takes one body, and headers only through dependencies")
    hints = typing.get_type_hints(endpoint, include_extras=True)
    parameters = inspect.signature(endpoint).parameters
    [body] = dependant.body_params
    model = hints.get(body.name)
    # Annotated[Model, Body(embed=True)] and the like are not the model itself.
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise _refusal(route, "the body must be a pydantic model, not embedded")
    for field in dependant.path_params:
        if hints.get(field.name) is not UUID:
            raise _refusal(route, f"path parameter {field.name} must be a UUID")
    for field in dependant.query_params:
        if parameters[field.name].default is inspect.Parameter.empty:
            raise _refusal(route, f"query parameter {field.name} needs a default")
    named, role_checks = _dependencies(route)
    plain = {f.name for f in (*dependant.path_params, *dependant.query_params, body)}
    if set(parameters) != plain | set(named.values()):
        raise _refusal(route, "the endpoint takes a parameter a plain request cannot supply")
    return _Plan(
        route=route,
        path_ids=tuple((f.name, f.alias) for f in dependant.path_params),
        body_name=body.name,
        body_model=model,
        write_name=named[get_write],
        holder_name=named[get_holder],
        role_checks=role_checks,
    )


def _dependencies(route: Any) -> tuple[dict[Callable[..., Any], str], tuple[RoleCheck, ...]]:
    """Return the parameter names of the write and the holder, and the role checks;
    raise ``TypeError`` on any other dependency but those skipped without a query."""
    named: dict[Callable[..., Any], str] = {}
    role_checks: list[RoleCheck] = []
    for sub in route.dependant.dependencies:
        if sub.call in (get_write, get_holder) and sub.name and sub.call not in named:
            named[sub.call] = sub.name
        elif isinstance(sub.call, RoleCheck):
            role_checks.append(sub.call)
        elif sub.call not in SKIPPED_WITHOUT_QUERY:
            raise _refusal(route, f"it cannot answer without {sub.call!r}")
    if len(named) != 2:
        raise _refusal(route, "the endpoint takes one WriteDep and one HolderDep")
    return named, tuple(role_checks)


async def _plain_values(plan: _Plan, request: Request) -> dict[str, Any] | None:
    """Return the endpoint's arguments, or None if the request is not plain."""
    if request.scope.get("query_string") or request.app.dependency_overrides:
        return None
    headers = request.headers
    authorization = headers.getlist("authorization")
    keys = headers.getlist("idempotency-key")
    if (
        len(authorization) != 1
        or len(keys) > 1
        or headers.get("content-type") != "application/json"
    ):
        return None
    values: dict[str, Any] = {}
    try:
        # The body first, as FastAPI reads it (json.loads, then the model from Python
        # values) before any dependency: a body it refuses never names a tenant in
        # the request's log line, and a read that fails is FastAPI's to answer.
        values[plan.body_name] = plan.body_model.model_validate(json.loads(await request.body()))
        for name, alias in plan.path_ids:
            values[name] = _UUID.validate_python(request.path_params[alias])
    except Exception:
        return None
    scheme, token = get_authorization_scheme_param(authorization[0])
    if scheme.lower() != "bearer" or not token:
        return None
    caller = recently_verified(request, token)
    if caller is None or caller.closed_by is not None:
        return None
    try:
        for check in plan.role_checks:
            check.check(caller)
        key = await get_idempotency_key(keys[0]) if keys else None
    except PalimpsestError:
        return None
    response = Response()
    del response.headers["content-length"]
    response.status_code = None  # type: ignore[assignment]  # as FastAPI's sub-response
    values[plan.write_name] = write_request(request, response, caller, key)
    values[plan.holder_name] = await get_holder(request, caller)
    return values


async def _answer(plan: _Plan, values: dict[str, Any]) -> Response:
    """Call the endpoint and answer as FastAPI would: the body through the
    response model, the status and headers the write set."""
    route = plan.route
    content = await serialize_response(
        field=route.response_field,
        response_content=await route.endpoint(**values),
        include=route.response_model_include,
        exclude=route.response_model_exclude,
        by_alias=route.response_model_by_alias,
        exclude_unset=route.response_model_exclude_unset,
        exclude_defaults=route.response_model_exclude_defaults,
        exclude_none=route.response_model_exclude_none,
        dump_json=True,
    )
    shaped: Response = values[plan.write_name].response
    answer = Response(
        content=content,
        media_type="application/json",
        status_code=shaped.status_code or route.status_code or 200,
    )
    answer.headers.raw.extend(shaped.headers.raw)
    return answer


_Endpoint = typing.TypeVar("_Endpoint", bound=Callable[..., Any])


def plain_write_post(
    router: APIRouter, path: str, **options: Any
) -> Callable[[_Endpoint], _Endpoint]:
    """Register the decorated endpoint as ``router.post(path, **options)`` would,
    as a :class:`PlainWriteRoute`."""

    def register(endpoint: _Endpoint) -> _Endpoint:
        router.add_api_route(
            path, endpoint, methods=["POST"], route_class_override=PlainWriteRoute, **options
        )
        return endpoint

    return register
