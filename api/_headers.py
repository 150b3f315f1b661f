"""Headers every response carries, whatever route or error produced it.

:class:`palimpsest.api._edge.Edge` puts them on each answer as it starts, errors
and streamed answers included.
"""

from __future__ import annotations

from starlette.types import Message, Send

__all__ = ["sending_nosniff", "with_nosniff"]

_NOSNIFF = (b"x-content-type-options", b"nosniff")


def with_nosniff(start: Message) -> Message:
    """Return a response's ``http.response.start`` message with
    ``X-Content-Type-Options: nosniff`` in place of any the route set.

    A browser that reaches the API must never guess a media type: content a
    caller stored as ``text/plain`` stays text, and JSON stays JSON. A new
    message, the route's own left as it was.
    """
    headers = [(k, v) for k, v in start.get("headers", []) if k != _NOSNIFF[0]]
    headers.append(_NOSNIFF)
    return {**start, "headers": headers}


def sending_nosniff(send: Send) -> Send:
    """Return ``send`` putting :func:`with_nosniff`'s header on the answer's start: for
    an answer of the edge's own, sent past its other jobs."""

    async def send_with_header(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = with_nosniff(message)
        await send(message)

    return send_with_header
