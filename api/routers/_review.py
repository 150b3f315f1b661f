"""``/review``: the page where a person reviews the forgetting pass's proposals.

Server-rendered HTML (Jinja2, every value escaped) with a vendored htmx
(``/review/static/htmx.min.js``; no CDN, no build step). A person signs in
with a token (:mod:`palimpsest.api._sessions`), sees the open proposals with both
memories side by side, and applies or rejects each; with htmx a decided
proposal leaves the list without a reload, and an error (a stale proposal,
the collapse guard, a closed proposal, a missing reason) replaces its card
with the card and the error. Without JavaScript the same forms post and
reload. A decision is made by calling the ``/v1/proposals`` routes'
functions with the same write request, so it is the API's decision.

Every page is served under a Content-Security-Policy that runs only this
origin's script file (no inline script or style, no ``eval``: htmx is
configured by a ``<meta>`` element), refuses framing, and is not cached.
The routes are not part of the JSON API and not in ``/openapi.json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import ValidationError

from palimpsest.api._cursor import decode_cursor, encode_cursor
from palimpsest.api._deps import RuntimeDep, WriteRequest
from palimpsest.api._problems import PROBLEMS
from palimpsest.api._sessions import (
    COOKIE,
    SIGN_IN_COOKIE,
    SIGN_IN_S,
    Session,
    Sessions,
    new_nonce,
    same_origin,
    tokens_match,
)
from palimpsest.api.routers import _proposals as proposals
from palimpsest.api.schemas import ProposalApply, ProposalReject
from palimpsest.api.schemas._common import Cursor
from palimpsest.domain.errors import (
    AuthenticationError,
    ContentTooLargeError,
    InvalidInputError,
    NotFoundError,
    PalimpsestError,
)
from palimpsest.domain.memory import MEMORY_TYPES
from palimpsest.domain.proposal import PROPOSAL_ACTIONS
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.collapse_guard import (
    CollapseGuardSettings,
    archivals_left,
    guard_day,
)
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.views.cycles import annotated, cycle_report, recent_cycles
from palimpsest.projections.views.proposals import (
    ProposalFilter,
    ProposalRecord,
    list_proposals,
    proposal_record,
)

__all__ = [
    "HTMX_VERSION",
    "Shown",
    "cycle_page",
    "cycles_page",
    "decide",
    "review_page",
    "router",
    "sign_in",
    "sign_in_page",
    "sign_out",
    "static_file",
]

router = APIRouter(prefix="/review", include_in_schema=False)

HTMX_VERSION = "2.0.11"
"""The vendored htmx (npm ``htmx.org``, 0BSD), in ``api/static/review/htmx.min.js``."""

_PAGE_SIZE = 20
_MAX_FORM_BYTES = 64 * 1024
_ACTIONS = tuple(a for a in PROPOSAL_ACTIONS if a != "keep")  # keeps are never open
_NOTHING_TYPED: dict[str, Any] = {
    "verdict": "",
    "reason": "",
    "resolution": "",
    "confirm_bulk": False,
}

_SECURITY_HEADERS = {
    # Only this origin's files run: no inline script or style, no eval. Content
    # that a memory holds is escaped text; if a tag ever slipped through, it
    # could neither run nor load anything from elsewhere.
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cache-Control": "no-store",  # pages hold memories' text
}

_HTMX_CONFIG = json.dumps(
    {
        "allowEval": False,  # the CSP forbids it; nothing here needs it
        "allowScriptTags": False,  # a swapped fragment never runs a script
        "includeIndicatorStyles": False,  # an inline <style> the CSP would refuse
        "historyEnabled": False,  # never copy pages (memories' text) to sessionStorage
        "historyCacheSize": 0,
        "selfRequestsOnly": True,
        # A refused decision answers 4xx with its card and the error: show it.
        "responseHandling": [
            {"code": "204", "swap": False},
            {"code": "[23]..", "swap": True},
            {"code": "(400|403|404|409|410|413|422)", "swap": True, "error": False},
            {"code": "[45]..", "swap": False, "error": True},
        ],
    },
    separators=(",", ":"),
)

_STATIC = {
    "htmx.min.js": "text/javascript; charset=utf-8",
    "review.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}

_templates = Environment(
    loader=PackageLoader("palimpsest.api", "templates"),
    autoescape=True,  # every template, whatever its name: memories' text is data
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass(frozen=True)
class Shown:
    """An error as the page shows it: the problem type the API would answer, and why."""

    slug: str
    title: str
    detail: str
    status: int


_CSRF_REFUSED = Shown("forbidden", "Forbidden", "the form's CSRF token is missing or wrong", 403)
_SIGN_IN_REFUSED = Shown(
    "forbidden", "Forbidden", "the sign-in form expired or came from elsewhere; try again", 403
)


@dataclass(frozen=True)
class _Filters:
    action: str
    memory_type: str
    cursor: str | None

    def query(self, cursor: str | None = None) -> str:
        """The filters as a query string (with a page's cursor)."""
        given = {"action": self.action, "type": self.memory_type, "cursor": cursor}
        return urlencode({k: v for k, v in given.items() if v})


def _render(
    template: str, status: int = 200, headers: Mapping[str, str] | None = None, **context: Any
) -> HTMLResponse:
    html = _templates.get_template(f"review/{template}").render(
        htmx_config=_HTMX_CONFIG, htmx_version=HTMX_VERSION, **context
    )
    return HTMLResponse(html, status_code=status, headers={**_SECURITY_HEADERS, **(headers or {})})


def _redirect(location: str) -> RedirectResponse:
    return RedirectResponse(location, status_code=303, headers=_SECURITY_HEADERS)


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def _secure(request: Request) -> bool:
    # Behind a TLS proxy uvicorn takes the scheme from X-Forwarded-Proto.
    return request.url.scheme == "https"


def _sessions(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.review_sessions
    return sessions


def _signed_in(request: Request, runtime: RuntimeDep) -> tuple[Session, Caller] | None:
    """Return the request's session and the caller its token stands for now, or None
    (no session, an ended one, or a token since revoked or of a deleted tenant)."""
    cookie = request.cookies.get(COOKIE)
    session = _sessions(request).get(runtime.log, cookie)
    if session is None:
        return None
    try:
        caller = authenticate(runtime.log, session.token)
    except AuthenticationError:
        caller = None
    if caller is None or caller.closed_by is not None:
        _sessions(request).end(runtime.log, cookie)
        return None
    request.state.tenant_id = str(caller.tenant_id)
    return session, caller


SignedInDep = Annotated[tuple[Session, Caller] | None, Depends(_signed_in)]


async def _read_form(request: Request) -> dict[str, str]:
    """Return a POSTed ``application/x-www-form-urlencoded`` body's fields (the first
    of each name).

    Parsed here rather than with python-multipart: the page's forms are small and
    urlencoded, and the service takes no dependency for them.

    Raises:
        InvalidInputError: another media type, or a body that is not UTF-8.
        ContentTooLargeError: a body past 64 KiB.
    """
    body = await request.body()
    if not body:
        return {}  # an empty form: every check below sees its fields missing
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        msg = "the review page takes application/x-www-form-urlencoded forms"
        raise InvalidInputError(msg)
    if len(body) > _MAX_FORM_BYTES:
        msg = f"a review form is at most {_MAX_FORM_BYTES} bytes"
        raise ContentTooLargeError(msg)
    try:
        text = body.decode("utf-8")
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=20, errors="strict")
    except (UnicodeDecodeError, ValueError) as e:
        msg = "the form is not valid UTF-8 urlencoded text"
        raise InvalidInputError(msg) from e
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    return fields


FormDep = Annotated[dict[str, str], Depends(_read_form)]


def _shown(error: Exception) -> Shown | None:
    """Return how the page shows an error, or None for one it must not swallow
    (the service failing: the problem handlers answer those)."""
    if isinstance(error, ValidationError):
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg']}" for e in error.errors()
        )
        return Shown("validation-error", "Validation error", detail, 422)
    if isinstance(error, PalimpsestError):
        for cls in type(error).__mro__:
            if cls in PROBLEMS:
                slug, status, title = PROBLEMS[cls]
                return None if status >= 500 else Shown(slug, title, str(error), status)
    return None


def _choice(value: str, allowed: tuple[str, ...], name: str) -> str:
    if value and value not in allowed:
        msg = f"{name} must be one of {', '.join(allowed)} (or empty for any)"
        raise InvalidInputError(msg)
    return value


def _list_context(
    request: Request, runtime: RuntimeDep, caller: Caller, session: Session, filters: _Filters
) -> dict[str, Any]:
    after = None if filters.cursor is None else decode_cursor(filters.cursor)
    where = ProposalFilter(
        status="proposed", action=filters.action or None, memory_type=filters.memory_type or None
    )
    items, following = list_proposals(
        runtime.log, caller.tenant_id, where, limit=_PAGE_SIZE, after=after
    )
    return {
        "guard_left": _guard_left(request, runtime, caller),
        "caller": caller,
        "can_decide": caller.may("writer"),
        "is_admin": caller.may("admin"),
        "csrf": session.csrf,
        "items": items,
        "filters": filters,
        "actions": _ACTIONS,
        "memory_types": MEMORY_TYPES,
        "next_query": None if following is None else filters.query(encode_cursor(following)),
        "first_query": filters.query() if filters.cursor else None,
        "errors": {},
        "typed": {},
        "nothing_typed": _NOTHING_TYPED,
        "notice": None,
    }


def _guard_left(request: Request, runtime: RuntimeDep, caller: Caller) -> int:
    """How many memories today's collapse-guard allowance still holds: the card offers
    an administrator to confirm past the guard only when applying would pass it."""
    today = guard_day(request.app.state.clock())
    return archivals_left(runtime.log, caller.tenant_id, today, CollapseGuardSettings())


@router.get("", response_class=HTMLResponse)
def review_page(
    request: Request,
    runtime: RuntimeDep,
    signed_in: SignedInDep,
    action: str = "",
    memory_type: Annotated[str, Query(alias="type")] = "",
    cursor: Cursor | None = None,
) -> Response:
    """The open proposals, newest first, filtered by action and memory type, a page
    at a time; signed-out visitors are sent to the sign-in form."""
    if signed_in is None:
        return _redirect("/review/sign-in")
    session, caller = signed_in
    filters = _Filters(
        _choice(action, _ACTIONS, "action"), _choice(memory_type, MEMORY_TYPES, "type"), cursor
    )
    return _render("list.html", **_list_context(request, runtime, caller, session, filters))


@router.get("/sign-in", response_class=HTMLResponse)
def sign_in_page(request: Request, signed_in: SignedInDep) -> Response:
    """The sign-in form (a token of any role); a signed-in visitor goes to the list."""
    if signed_in is not None:
        return _redirect("/review")
    return _sign_in_form(request)


def _sign_in_form(request: Request, error: Shown | None = None) -> HTMLResponse:
    nonce = new_nonce()
    response = _render(
        "sign_in.html", status=error.status if error else 200, nonce=nonce, error=error
    )
    response.set_cookie(
        SIGN_IN_COOKIE,
        nonce,
        max_age=SIGN_IN_S,
        path="/review",
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/sign-in", response_class=HTMLResponse)
def sign_in(request: Request, runtime: RuntimeDep, form: FormDep) -> Response:
    """Sign in with a token: on success a new session, its cookie, and the list."""
    if not same_origin(request.headers) or not tokens_match(
        request.cookies.get(SIGN_IN_COOKIE, ""), form.get("csrf")
    ):
        return _sign_in_form(request, _SIGN_IN_REFUSED)
    token = form.get("token", "").strip()
    try:
        caller = authenticate(runtime.log, token)
    except AuthenticationError as e:
        return _sign_in_form(request, Shown("unauthenticated", "Unauthenticated", str(e), 401))
    if caller.closed_by is not None:
        gone = Shown("tenant-deleted", "Tenant deleted", "this token's tenant was deleted", 410)
        return _sign_in_form(request, gone)
    _sessions(request).end(runtime.log, request.cookies.get(COOKIE))
    cookie, _ = _sessions(request).start(runtime.log, caller.tenant_id, token)
    response = _redirect("/review")
    response.set_cookie(
        COOKIE, cookie, path="/review", secure=_secure(request), httponly=True, samesite="strict"
    )
    response.delete_cookie(SIGN_IN_COOKIE, path="/review")
    return response


@router.post("/sign-out")
def sign_out(
    request: Request, runtime: RuntimeDep, signed_in: SignedInDep, form: FormDep
) -> Response:
    """End the session (the form's CSRF token must match) and return to sign-in."""
    if signed_in is not None:
        session, _ = signed_in
        if not same_origin(request.headers) or not tokens_match(session.csrf, form.get("csrf")):
            return _render("refused.html", status=403, error=_CSRF_REFUSED)
        _sessions(request).end(runtime.log, request.cookies.get(COOKIE))
    response = _redirect("/review/sign-in")
    response.delete_cookie(COOKIE, path="/review")
    return response


@router.post("/proposals/{proposal_id}/{verdict}", response_class=HTMLResponse)
def decide(
    proposal_id: UUID,
    verdict: Literal["apply", "reject"],
    request: Request,
    runtime: RuntimeDep,
    signed_in: SignedInDep,
    form: FormDep,
) -> Response:
    """Apply or reject a proposal with the reason typed (and, for a conflict, the
    resolution chosen), through the API's own write; with htmx the answer replaces the
    proposal's card: nothing (it left the list) or the card with the error."""
    htmx = _is_htmx(request)
    if signed_in is None:
        if htmx:  # htmx follows HX-Redirect with a full navigation
            return Response(status_code=401, headers={"HX-Redirect": "/review/sign-in"})
        return _redirect("/review/sign-in")
    session, caller = signed_in
    if not same_origin(request.headers) or not tokens_match(session.csrf, form.get("csrf")):
        return _render("refused.html", status=403, error=_CSRF_REFUSED)
    typed = {
        "verdict": verdict,
        "reason": form.get("reason", ""),
        "resolution": form.get("resolution", ""),
        "confirm_bulk": form.get("confirm_bulk") == "yes",
    }
    write = WriteRequest(
        caller=caller,
        writer=request.app.state.writer,
        runtime=runtime,
        key=None,
        method=request.method,
        path=request.url.path,
        response=Response(),
        drains=request.app.state.drains,
        wake=request.app.state.wake,
    )
    try:
        # The role first, as the API checks it: a reader learns nothing of the rules.
        caller.require("writer", "decide proposals")
        if verdict == "apply":
            body = ProposalApply(
                reason=typed["reason"] or None,
                resolution=typed["resolution"] or None,
                confirm_bulk=bool(typed["confirm_bulk"]),
            )
            outcome = proposals.apply_proposal(proposal_id, write, body)
        else:
            outcome = proposals.reject_proposal(
                proposal_id, ProposalReject(reason=typed["reason"]), write
            )
    except (ValidationError, PalimpsestError) as error:
        shown = _shown(error)
        if shown is None:
            raise
        return _refused(request, runtime, caller, session, proposal_id, shown, typed, htmx=htmx)
    if not htmx:
        return _redirect("/review")
    return _render("decided.html", verdict=verdict, proposal_id=proposal_id, decision=outcome)


def _refused(
    request: Request,
    runtime: RuntimeDep,
    caller: Caller,
    session: Session,
    proposal_id: UUID,
    shown: Shown,
    typed: dict[str, Any],
    *,
    htmx: bool,
) -> HTMLResponse:
    """Answer a refused decision: the proposal's card with the error (htmx), or the
    list with the error on that card (a plain form post)."""
    if not htmx:
        context = _list_context(request, runtime, caller, session, _Filters("", "", None))
        if any(item.id == proposal_id for item in context["items"]):
            context["errors"] = {proposal_id: shown}
            context["typed"] = {proposal_id: typed}
        else:
            context["notice"] = shown
        return _render("list.html", status=shown.status, **context)
    try:
        record: ProposalRecord | None = proposals.read_proposal(proposal_id, caller, runtime)
    except NotFoundError:
        record = None
    return _render(
        "card.html",
        status=shown.status,
        p=record,
        proposal_id=proposal_id,
        error=shown,
        typed=typed,
        can_decide=caller.may("writer"),
        is_admin=caller.may("admin"),
        csrf=session.csrf,
        guard_left=_guard_left(request, runtime, caller),
    )


_CYCLES_SHOWN = 20
"""Cycle runs the page lists, newest first."""


@router.get("/cycles", response_class=HTMLResponse)
def cycles_page(request: Request, runtime: RuntimeDep, signed_in: SignedInDep) -> Response:
    """The tenant's latest decay cycle runs: when, what they bucketed and proposed."""
    if signed_in is None:
        return _redirect("/review/sign-in")
    session, caller = signed_in
    found = recent_cycles(runtime.log, caller.tenant_id, _CYCLES_SHOWN)
    return _render("cycles.html", caller=caller, csrf=session.csrf, cycles=found)


@router.get("/cycles/{cycle_id}", response_class=HTMLResponse)
def cycle_page(
    request: Request, runtime: RuntimeDep, signed_in: SignedInDep, cycle_id: UUID
) -> Response:
    """One cycle run: its counts, what its buckets mean, what it archived and faded by
    text, and its proposals as cards (each with the cycle's reason: the score and the
    factors that made it prune), decidable as on the list."""
    if signed_in is None:
        return _redirect("/review/sign-in")
    session, caller = signed_in
    found = cycle_report(runtime.log, caller.tenant_id, cycle_id)
    if found is None:
        msg = f"cycle {cycle_id} not found"
        raise NotFoundError(msg)
    report = annotated(runtime.log, caller.tenant_id, found)
    cards = [proposal_record(runtime.log, caller.tenant_id, UUID(p)) for p in found["proposals"]]
    return _render(
        "cycle.html",
        caller=caller,
        csrf=session.csrf,
        report=report,
        items=cards,
        can_decide=caller.may("writer"),
        is_admin=caller.may("admin"),
        guard_left=_guard_left(request, runtime, caller),
        errors={},
        typed={},
        nothing_typed=_NOTHING_TYPED,
    )


@cache
def _static(name: str) -> bytes:
    return resources.files("palimpsest.api").joinpath("static", "review", name).read_bytes()


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """The page's own files: htmx and its style sheet."""
    if name not in _STATIC:
        msg = f"no review file named {name}"
        raise NotFoundError(msg)
    return Response(
        _static(name),
        media_type=_STATIC[name],
        headers={"Cache-Control": "public, max-age=3600", "X-Frame-Options": "DENY"},
    )
