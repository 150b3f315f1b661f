"""Headers every response carries, whatever route or error produced it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["NoSniff"]


class NoSniff:
    """Add ``X-Content-Type-Options: nosniff`` to every HTTP response.

    A browser that reaches the API must never guess a media type: content a
    caller stored as ``text/plain`` stays text, and JSON stays JSON. Pure ASGI
    (not ``BaseHTTPMiddleware``), so streamed responses are not buffered.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k != b"x-content-type-options"
                ]
                headers.append((b"x-content-type-options", b"nosniff"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_header)
