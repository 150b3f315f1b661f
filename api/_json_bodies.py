"""Every JSON request body parsed strictly (:mod:`palimpsest.api._strict_json`) before a
route reads it, and refused with its problem document, having written nothing.

:class:`palimpsest.api._edge.Edge` reads the body once with :func:`read_json_body`,
then hands it on as it came. FastAPI's own parse then reads the same value again.
The parsed value is left in the request's scope
(:data:`~palimpsest.api._strict_json.PARSED_SCOPE_KEY`) for the plain requests
(:mod:`palimpsest.api._plain_requests`), which read it rather than parse twice.
"""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from palimpsest.api._problems import problem_of, problem_response
from palimpsest.api._strict_json import PARSED_SCOPE_KEY, is_json_media_type, parse_json
from palimpsest.domain.errors import InvalidInputError

__all__ = ["read_json_body", "reads_json_body", "refuse_body"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

_SKIPPED = ("/mcp",)
"""Paths whose endpoint parses its own body: ``/mcp`` answers a bad one in JSON-RPC."""


def reads_json_body(scope: Scope) -> bool:
    """Return whether an HTTP request's body is parsed here before its route sees it:
    a method with a body, sent as JSON (:func:`is_json_media_type`), off ``/mcp``."""
    return (
        scope["method"] in _BODY_METHODS
        and not str(scope["path"]).startswith(_SKIPPED)
        and is_json_media_type(_header(scope, b"content-type"))
    )


async def read_json_body(scope: Scope, receive: Receive) -> Message:
    """Read the whole body from ``receive`` and parse it with :func:`parse_json`, leaving
    the value in the scope; return the message to hand the route in place of those read.

    That is the whole body in one message; or, if the client left before sending it
    all, its leaving (nothing to parse).

    Raises:
        InvalidInputError: :func:`parse_json` refused the body (answer it with
            :func:`refuse_body`).
    """
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: nothing to parse
            return message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    if body:
        scope[PARSED_SCOPE_KEY] = parse_json(body)
    return {"type": "http.request", "body": body, "more_body": False}


async def refuse_body(scope: Scope, error: InvalidInputError, send: Send) -> None:
    """Answer a body :func:`read_json_body` refused with its problem document."""
    slug, status, title = problem_of(error)
    response = problem_response(status, slug, title, str(error), instance=str(scope["path"]))

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, nothing, send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None
