"""Every JSON request body parsed strictly (:mod:`palimpsest.api._strict_json`) before a
route reads it, and refused with its problem document, having written nothing.

FastAPI's own parse then reads the same value again. The parsed value is left in
the request's scope (:data:`~palimpsest.api._strict_json.PARSED_SCOPE_KEY`) for the
plain requests (:mod:`palimpsest.api._plain_requests`), which read it rather than
parse twice.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from palimpsest.api._problems import problem_of, problem_response
from palimpsest.api._strict_json import PARSED_SCOPE_KEY, is_json_media_type, parse_json
from palimpsest.domain.errors import InvalidInputError

__all__ = ["StrictJson"]

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class StrictJson:
    """Parse every JSON request body with :func:`parse_json` before a route reads it;
    refuse one it refuses with its problem document, having written nothing.

    Pure ASGI: the body is read once, then handed on as it came. ``/mcp`` is left to
    its endpoint, which answers a bad body in JSON-RPC.
    """

    def __init__(self, app: ASGIApp, *, skip_prefixes: tuple[str, ...] = ("/mcp",)) -> None:
        self.app = app
        self._skip = skip_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _BODY_METHODS
            or str(scope["path"]).startswith(self._skip)
            or not is_json_media_type(_header(scope, b"content-type"))
        ):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: nothing to parse
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body:
            try:
                scope[PARSED_SCOPE_KEY] = parse_json(body)
            except InvalidInputError as e:
                await _refuse(scope, e, send)
                return
        replayed: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([replayed], receive), send)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


async def _refuse(scope: Scope, error: InvalidInputError, send: Send) -> None:
    slug, status, title = problem_of(error)
    response = problem_response(status, slug, title, str(error), instance=str(scope["path"]))

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, nothing, send)
