"""Plain requests answered without FastAPI's dependency solving.

Solving a route's dependencies (the caller, its role, the ``Idempotency-Key``,
the admission holder, the runtime, the query) took about a third of the event
loop's time per write (docs/benchmarks.md). For a *plain* request every one of
those values is known at a glance, so :class:`PlainRoute` gets them from the
dependencies' own functions, given what they would have been given, and calls
the same endpoint. Every other request goes to FastAPI's own handler, which
answers it as before (with the body, if it was read, kept).

A request is plain when it has no query string (or, on a route that declares
``query=True``, a query of the route's own parameters that FastAPI's validation of
them accepts); one ``Authorization: Bearer``
header whose token this process verified lately, of an open tenant, with a
role that may perform the route's writes; at most one ``Idempotency-Key``, a
well-formed one if the route takes it; path ids that are UUIDs; for a route
with a body, ``Content-Type: application/json`` exactly and JSON the route's
model accepts; and the app overrides no dependency (tests that do get
FastAPI's handler). Whatever is not plain is where a problem answer comes
from, so every refusal is still FastAPI's and the exception handlers'
(:mod:`palimpsest.api._problems`); an error the endpoint raises goes to the same handlers
by the same route wrapper.

Only the arguments are built here: the endpoint, the response model's
serialisation (:func:`fastapi.routing.serialize_response`), the middlewares and
the exception handlers are the ones every request goes through.

A route may also serialise its own answer where it read it (:class:`JsonAnswer`): on
the worker thread, not on the event loop, which every request's routing, sending
and receiving wait for (under 8 clients it spent a fifth of its time in answers'
``dump_json``, issue 48). The bytes are the ones FastAPI would have made: the route's
response model is the one given here, validated and dumped by the same field FastAPI
builds for a route (``fastapi.utils.create_model_field``), with the route's options.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from fastapi import Request, Response
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.utils import request_params_to_args
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import APIRoute, APIRouter, serialize_response
from fastapi.security.utils import get_authorization_scheme_param
from fastapi.utils import create_model_field, is_body_allowed_for_status_code
from pydantic import BaseModel, TypeAdapter

from palimpsest.api._admission import get_holder
from palimpsest.api._deps import (
    get_clock,
    get_idempotency_key,
    get_open_caller,
    get_runtime,
    get_write,
    recently_verified,
)
from palimpsest.api._fastapi_internals import included_route
from palimpsest.api._query_params import declared_query_names, refuse_unknown_query
from palimpsest.api._specs import RoleCheck
from palimpsest.api._strict_json import PARSED_SCOPE_KEY, parse_json
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.commands.caller import Caller

__all__ = [
    "JsonAnswer",
    "PlainQueryRoute",
    "PlainRoute",
    "SKIPPED_WITHOUT_QUERY",
    "SUPPLIED",
    "model_bytes",
    "plain_route",
]

_UUID: TypeAdapter[UUID] = TypeAdapter(UUID)
_UNPARSED = object()

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


@dataclass(frozen=True)
class _Given:
    """What FastAPI would have handed a route's dependencies, for a plain request."""

    request: Request
    response: Response | None
    """None when neither the endpoint nor a dependency of it shapes the response."""
    caller: Caller
    key: str | None


async def _the_caller(given: _Given) -> Caller:
    return given.caller


def _shaped(given: _Given) -> Response:
    assert given.response is not None, "a route whose write shapes the response has one"
    return given.response


SUPPLIED: dict[Callable[..., Any], Callable[[_Given], Awaitable[Any]]] = {
    get_open_caller: _the_caller,
    get_write: lambda g: get_write(g.request, _shaped(g), g.caller, g.key),
    get_holder: lambda g: get_holder(g.request, g.caller),
    get_runtime: lambda g: get_runtime(g.request),
    get_clock: lambda g: get_clock(g.request),
}
"""The dependencies a plain request's endpoint may take, each called as FastAPI
would call it once the caller (``get_open_caller``) is known."""

_NEED_THE_CALLER = (get_open_caller, get_write, get_holder)
"""The supplied dependencies FastAPI solves by authenticating the caller."""

_ATOMIC = (type(None), bool, int, float, str, bytes)
"""Defaults ``copy.deepcopy`` returns as they are: a plain request takes them uncopied."""

SKIPPED_WITHOUT_QUERY: tuple[Callable[..., Any], ...] = (refuse_unknown_query,)
"""The dependencies a plain request has no use for: it has no query string, or (on a
:class:`PlainQueryRoute`) one whose every name the route declares."""


class PlainRoute(APIRoute):
    """An ``APIRoute`` (FastAPI's documented extension point) whose handler answers
    a plain request itself and gives any other request to FastAPI's.

    The endpoint must be async and take nothing but: path ids typed ``UUID``; at
    most one body, a pydantic model, not embedded; the response (``Response``);
    dependencies of :data:`SUPPLIED`, at least one that needs the caller; and
    query parameters whose defaults are neither computed nor validated (any query
    parameters, on a :class:`PlainQueryRoute`). The
    route, its routers and the app may add role checks
    (:func:`palimpsest.api._specs.requires`) and
    :func:`~palimpsest.api._query_params.refuse_unknown_query`. Anything else raises
    ``TypeError`` where FastAPI builds the handler (for the route's own, when it
    is declared; for what an ``include_router`` or the app adds, when FastAPI
    first routes to it), so that nothing is ever skipped here in silence.
    """

    plain_query = False
    """Whether a request with a query string may be plain (:class:`PlainQueryRoute`)."""

    def get_route_handler(self) -> Handler:
        full = super().get_route_handler()
        # As APIRoute.get_route_handler finds what an inclusion added (FastAPI 0.165):
        # the app's and the include's dependencies, its response class, its prefix.
        route = included_route(self)
        plan = _plan_of(route, query=self.plain_query)

        async def handler(request: Request) -> Response:
            values = await _plain_values(plan, request)
            if values is None:
                return await full(request)
            return await _answer(plan, *values)

        return handler


class PlainQueryRoute(PlainRoute):
    """A :class:`PlainRoute` whose plain requests may carry a query: of the route's own
    parameters only (an unknown one is refused by FastAPI's handler, as
    :func:`~palimpsest.api._query_params.refuse_unknown_query` refuses it), validated
    as FastAPI validates them (``request_params_to_args``, the function its
    dependency solving calls); a query it refuses goes to FastAPI's handler, whose
    answer is the problem. For a read whose query is its request (a batch of ids),
    which FastAPI's dependency solving would cost more than the read's statement."""

    plain_query = True


@dataclass(frozen=True)
class _Plan:
    """What a route's plain requests need, checked once: its parameters by role."""

    route: Any
    """The route as included (an ``APIRoute``, or FastAPI's included copy of one)."""
    path_ids: tuple[tuple[str, str], ...]
    """Each path id's parameter name, and the name the path gives it."""
    query_defaults: tuple[tuple[str, Any, bool], ...]
    """Each query parameter's name, default, and whether it is copied (not atomic)."""
    query_names: frozenset[str] | None
    """The query parameters the route declares, when a plain request may have a query
    (:class:`PlainQueryRoute`); None when it may not."""
    body: tuple[str, type[BaseModel]] | None
    response_name: str | None
    shapes: bool
    """Whether the endpoint or a dependency of it may shape the response (its status
    and headers): only then is one made for a request."""
    supplied: tuple[tuple[str, Callable[[_Given], Awaitable[Any]]], ...]
    role_checks: tuple[RoleCheck, ...]
    keyed: bool
    """Whether the route takes an ``Idempotency-Key`` (through its write)."""


def _refusal(route: Any, what: str) -> TypeError:
    return TypeError(f"PlainRoute {route.path}: {what}")


def _plan_of(route: Any, *, query: bool = False) -> _Plan:
    """Return the plan of ``route`` (whose plain requests may have a query when
    ``query``); raise ``TypeError`` on what a plain request would have to skip or
    could not supply."""
    dependant, endpoint = route.dependant, route.endpoint
    if not inspect.iscoroutinefunction(endpoint):
        raise _refusal(route, "the endpoint must be async")
    if route.response_field is None or not isinstance(route.response_class, DefaultPlaceholder):
        raise _refusal(route, "it needs a response model and the default response class")
    if dependant.header_params or dependant.cookie_params or len(dependant.body_params) > 1:
        raise _refusal(route, "it takes at most one body, and headers only through dependencies")
    hints = typing.get_type_hints(endpoint, include_extras=True)
    parameters = inspect.signature(endpoint).parameters
    body = None
    for field in dependant.body_params:
        model = hints.get(field.name)
        # Annotated[Model, Body(embed=True)] and the like are not the model itself.
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise _refusal(route, "the body must be a pydantic model, not embedded")
        body = (field.name, model)
    for field in dependant.path_params:
        if hints.get(field.name) is not UUID:
            raise _refusal(route, f"path parameter {field.name} must be a UUID")
    for field in dependant.query_params:
        # Absent, a parameter takes a copy of its default, unvalidated (as FastAPI's
        # _validate_value_with_model_field does); one FastAPI would compute or check
        # is not supplied here.
        info = field.field_info
        if query:  # validated, defaults included, as FastAPI validates them
            continue
        if info.is_required() or info.default_factory is not None or info.validate_default:
            raise _refusal(route, f"query parameter {field.name} needs a plain default")
    supplied, role_checks = _dependencies(route)
    plain = {f.name for f in (*dependant.path_params, *dependant.query_params)}
    plain |= {name for name, _ in supplied} | ({body[0]} if body else set())
    response_name = dependant.response_param_name
    if set(parameters) - {response_name} != plain:
        raise _refusal(route, "the endpoint takes a parameter a plain request cannot supply")
    keyed = any(call is SUPPLIED[get_write] for _, call in supplied)
    return _Plan(
        route=route,
        path_ids=tuple((f.name, f.alias) for f in dependant.path_params),
        query_defaults=tuple(
            (f.name, f.default, type(f.default) not in _ATOMIC) for f in dependant.query_params
        ),
        query_names=declared_query_names(dependant) if query else None,
        body=body,
        response_name=response_name,
        shapes=response_name is not None or keyed,  # a write may answer a replay's header
        supplied=supplied,
        role_checks=role_checks,
        keyed=keyed,
    )


def _dependencies(
    route: Any,
) -> tuple[tuple[tuple[str, Callable[[_Given], Awaitable[Any]]], ...], tuple[RoleCheck, ...]]:
    """Return the parameters :data:`SUPPLIED` gives, and the role checks; raise
    ``TypeError`` on any other dependency but those skipped without a query."""
    supplied: dict[str, Callable[[_Given], Awaitable[Any]]] = {}
    role_checks: list[RoleCheck] = []
    called: list[Callable[..., Any]] = []
    for sub in route.dependant.dependencies:
        if sub.concurrency is not None or not sub.use_cache or sub.own_oauth_scopes:
            # A limit, a fresh call each time, scopes: what solving it would do.
            raise _refusal(route, f"it cannot declare {sub.call!r} that way")
        if sub.call in SUPPLIED and sub.name:
            supplied[sub.name] = SUPPLIED[sub.call]
            called.append(sub.call)
        elif isinstance(sub.call, RoleCheck):
            role_checks.append(sub.call)
        elif sub.call not in SKIPPED_WITHOUT_QUERY:
            raise _refusal(route, f"it cannot answer without {sub.call!r}")
    if not (role_checks or any(call in _NEED_THE_CALLER for call in called)):
        # A route that authenticates nobody has no dependency solving worth skipping,
        # and answering it here would still ask for a token.
        raise _refusal(route, "it takes no caller")
    return tuple(supplied.items()), tuple(role_checks)


async def _plain_values(
    plan: _Plan, request: Request
) -> tuple[dict[str, Any], Response | None] | None:
    """Return the endpoint's arguments and the response it may shape (None if it shapes
    none), or None if the request is not plain."""
    query = request.scope.get("query_string")
    if (query and plan.query_names is None) or request.app.dependency_overrides:
        return None
    headers = request.headers
    authorization = headers.getlist("authorization")
    keys = headers.getlist("idempotency-key")
    if len(authorization) != 1 or len(keys) > 1:
        return None
    values = await _body_and_ids(plan, request)
    if values is None:
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
        key = await get_idempotency_key(keys[0]) if keys and plan.keyed else None
    except PalimpsestError:
        return None
    query_values = _query_values(plan, request)
    if query_values is None:
        return None
    values |= query_values
    response = None
    if plan.shapes:
        response = Response()
        del response.headers["content-length"]
        response.status_code = None  # type: ignore[assignment]  # as FastAPI's sub-response
    given = _Given(request, response, caller, key)
    for name, supply in plan.supplied:
        values[name] = await supply(given)
    if plan.response_name is not None:
        values[plan.response_name] = response
    return values, response


def _query_values(plan: _Plan, request: Request) -> dict[str, Any] | None:
    """Return the query parameters: copies of their defaults (no query), or, on a
    :class:`PlainQueryRoute`, as FastAPI's dependency solving validates them; None
    if it would refuse the query (a parameter the route does not declare, or a value
    its validation does not accept)."""
    if plan.query_names is None:
        return {
            name: copy.deepcopy(default) if copied else default
            for name, default, copied in plan.query_defaults
        }
    params = request.query_params
    if not plan.query_names.issuperset(params.keys()):
        return None
    values, errors = request_params_to_args(plan.route.dependant.query_params, params)
    return None if errors else values


async def _body_and_ids(plan: _Plan, request: Request) -> dict[str, Any] | None:
    """Return the body and the path ids as the endpoint takes them, or None if
    FastAPI would refuse them (or could not read the body).

    Read first, as FastAPI reads them (the value :mod:`palimpsest.api._json_bodies`
    parsed, then the model from Python values) before any dependency: a body it
    refuses never names a tenant in the request's log line.
    """
    values: dict[str, Any] = {}
    try:
        if plan.body is not None:
            if request.headers.get("content-type") != "application/json":
                return None
            name, model = plan.body
            parsed = request.scope.get(PARSED_SCOPE_KEY, _UNPARSED)
            if parsed is _UNPARSED:  # an app without the edge's JSON check (none of ours)
                parsed = parse_json(await request.body())
            values[name] = model.model_validate(parsed)
        for name, alias in plan.path_ids:
            values[name] = _UUID.validate_python(request.path_params[alias])
    except Exception:
        return None
    return values


async def model_bytes(route: APIRoute, content: Any) -> bytes:
    """Return what FastAPI sends for ``content`` returned by ``route``'s endpoint: its
    response model's serialisation, with the route's options, as FastAPI's handler
    calls :func:`fastapi.routing.serialize_response`."""
    dumped = await serialize_response(
        field=route.response_field,
        response_content=content,
        include=route.response_model_include,
        exclude=route.response_model_exclude,
        by_alias=route.response_model_by_alias,
        exclude_unset=route.response_model_exclude_unset,
        exclude_defaults=route.response_model_exclude_defaults,
        exclude_none=route.response_model_exclude_none,
        dump_json=True,
    )
    assert isinstance(dumped, bytes)  # dump_json
    return dumped


async def _answer(plan: _Plan, values: dict[str, Any], shaped: Response | None) -> Response:
    """Call the endpoint and answer as FastAPI would: the body through the
    response model, with the status and headers the endpoint set (on ``shaped``)."""
    route = plan.route
    returned = await route.endpoint(**values)
    if isinstance(returned, Response):
        return returned  # sent as it is, as FastAPI sends it
    content = await model_bytes(route, returned)
    answer = Response(
        content=content,
        media_type="application/json",
        status_code=(shaped and shaped.status_code) or route.status_code or 200,
    )
    if not is_body_allowed_for_status_code(answer.status_code):
        answer.body = b""
    if shaped is not None:
        answer.headers.raw.extend(shaped.headers.raw)
    return answer


class JsonAnswer:
    """A route's JSON answers, made by the endpoint itself: ``dump`` its answer where it
    has it (on the worker thread that read it), return ``response(bytes)``.

    The route is declared with it (:func:`plain_route`'s ``answers``), which gives the
    route this response model and ``exclude_none``: its schema (OpenAPI) is the one
    the model declares, and the bytes are the ones FastAPI would make of the same
    answer, validated and dumped as :func:`fastapi.routing.serialize_response` does
    (``dump_json``, by alias) through the same kind of field. A returned ``Response``
    is sent as it is, on FastAPI's path and on the plain one alike.
    """

    __slots__ = ("_field", "exclude_none", "response_model")

    def __init__(self, response_model: Any, *, exclude_none: bool = False) -> None:
        self.response_model = response_model
        self.exclude_none = exclude_none
        self._field = create_model_field(
            name="Response_ready", type_=response_model, mode="serialization"
        )

    def dump(self, content: Any) -> bytes:
        """Return ``content`` as the route's JSON answer.

        Raises:
            ResponseValidationError: ``content`` is not of the response model (as
                FastAPI raises it for an endpoint's answer).
        """
        value, errors = self._field.validate(content, {}, loc=("response",))
        if errors:
            raise ResponseValidationError(errors=errors, body=content)
        return self._field.serialize_json(value, by_alias=True, exclude_none=self.exclude_none)

    @staticmethod
    def response(body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> Response:
        """Return the answer of ``body`` (200), with ``headers`` after its own, where
        FastAPI puts those an endpoint sets on its ``Response`` parameter."""
        answer = Response(content=body, media_type="application/json")
        answer.headers.raw.extend(headers)
        return answer


_Endpoint = typing.TypeVar("_Endpoint", bound=Callable[..., Any])


def plain_route(
    router: APIRouter,
    method: str,
    path: str,
    *,
    query: bool = False,
    answers: JsonAnswer | None = None,
    **options: Any,
) -> Callable[[_Endpoint], _Endpoint]:
    """Register the decorated endpoint as ``router.api_route(path, methods=[method],
    **options)`` would, as a :class:`PlainRoute` (a :class:`PlainQueryRoute` with
    ``query``). With ``answers``, the endpoint returns :meth:`JsonAnswer.response`, and
    the route takes its response model and ``exclude_none`` from ``answers``."""
    route_class = PlainQueryRoute if query else PlainRoute
    if answers is not None:
        if {"response_model", "response_model_exclude_none"} & set(options):
            msg = f"PlainRoute {path}: the response model is the one of its answers"
            raise TypeError(msg)
        options |= {
            "response_model": answers.response_model,
            "response_model_exclude_none": answers.exclude_none,
        }

    def register(endpoint: _Endpoint) -> _Endpoint:
        router.add_api_route(
            path, endpoint, methods=[method], route_class_override=route_class, **options
        )
        return endpoint

    return register
