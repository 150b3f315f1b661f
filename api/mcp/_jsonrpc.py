"""JSON-RPC messages the SDK would misread, refused with JSON-RPC errors, over HTTP and
stdio alike.

The SDK reads a message whose ``id`` is neither a string nor an integer (``1.5``,
``true``, ``null``, an object) as a *notification*: it answers nothing (202 over
HTTP) and the tool never runs, so the agent waits for an answer that never comes.
JSON-RPC 2.0 §5.1 answers such a request with ``-32600 Invalid Request`` and a
null id, and MCP allows only strings and integers. A body the strict parser
(:mod:`palimpsest.api._strict_json`) refuses answers ``-32700 Parse error``, as an
HTTP body does with a problem document.
"""

from __future__ import annotations

from typing import Any

from mcp.types import JSONRPCError

from palimpsest.api._strict_json import parse_json
from palimpsest.domain.errors import InvalidInputError

__all__ = ["INVALID_REQUEST", "PARSE_ERROR", "refusal"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _error(code: int, message: str) -> JSONRPCError:
    return JSONRPCError.model_validate(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    )


def _bad_id(message: Any) -> str | None:
    if not isinstance(message, dict) or "id" not in message:
        return None  # a notification has none; the SDK refuses what is not an object
    given = message["id"]
    if isinstance(given, str) or (isinstance(given, int) and not isinstance(given, bool)):
        return None
    return f"a request's id must be a string or an integer (MCP), not {given!r}"


def refusal(raw: bytes | str) -> JSONRPCError | None:
    """Return the JSON-RPC error that answers a message (or a batch) the SDK must not
    read, or None for one it may.

    The message is parsed strictly, as every request body of the service is: not
    UTF-8, not JSON, a key given twice or nesting too deep is a parse error.
    """
    try:
        value = parse_json(raw.encode() if isinstance(raw, str) else raw)
    except InvalidInputError as e:
        return _error(PARSE_ERROR, f"Parse error: {e}")
    for message in value if isinstance(value, list) else [value]:
        if (problem := _bad_id(message)) is not None:
            return _error(INVALID_REQUEST, f"Invalid Request: {problem}")
    return None
