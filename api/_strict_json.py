"""Request bodies as JSON: one strict parser, for every route and for ``/mcp``.

RFC 8259 leaves a parser free to take what Python's :func:`json.loads` takes
from bytes, and every freedom is a way for two readers of one body to
disagree: a UTF-16 body or a byte-order mark (``json.loads`` guesses the
encoding; RFC 8259 §8.1 says UTF-8, no BOM), a key given twice (the last one
wins here, the first one in other parsers, so a proxy or a log that checked
the first was fooled), ``NaN`` and ``Infinity`` (not JSON at all). And nesting
deep enough to exhaust the parser's stack was answered as a body that is not
UTF-8. So the service reads a body one way: UTF-8 only, each key once, JSON's
own numbers, at most :data:`MAX_DEPTH` arrays and objects deep, each refusal
with a problem type of its own.

:func:`palimpsest.api._json_bodies.read_json_body` parses every JSON body with
:func:`parse_json` before a route sees it; ``/mcp`` answers in JSON-RPC, so its
endpoint calls :func:`parse_json` itself.
"""

from __future__ import annotations

import json
from typing import Any

from palimpsest.domain.errors import InvalidInputError

__all__ = [
    "DuplicateKeyError",
    "JsonTooDeepError",
    "MAX_DEPTH",
    "MalformedJsonError",
    "PARSED_SCOPE_KEY",
    "is_json_media_type",
    "parse_json",
]

MAX_DEPTH = 64
"""How deep (arrays and objects within each other) a body may nest: far past any
schema of ours (a batch of memories with metadata is 5), far below the parser's
recursion limit."""

PARSED_SCOPE_KEY = "palimpsest.json"
"""Where :func:`palimpsest.api._json_bodies.read_json_body` leaves a parsed body in the
request's ASGI scope."""

_BOM = b"\xef\xbb\xbf"


class MalformedJsonError(InvalidInputError):
    """Raised when a body is not JSON encoded as UTF-8 (400 ``malformed-json``)."""


class DuplicateKeyError(MalformedJsonError):
    """Raised when an object in a body names a key twice (400 ``duplicate-key``)."""


class JsonTooDeepError(MalformedJsonError):
    """Raised when a body nests deeper than :data:`MAX_DEPTH` (400 ``json-too-deep``)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        keys = [k for k, _ in pairs]
        twice = next(k for i, k in enumerate(keys) if k in keys[:i])
        msg = f"the request body names the key {twice!r} twice in one object"
        raise DuplicateKeyError(msg)
    return obj


def _constant(name: str) -> Any:
    msg = f"the request body holds {name}, which is not JSON (RFC 8259 has no such number)"
    raise MalformedJsonError(msg)


def _deeper_than(value: Any, limit: int) -> bool:
    """Return whether arrays and objects nest in ``value`` deeper than ``limit``
    (a walk of the parsed containers: cheaper than scanning the bytes around strings)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        container, depth = pending.pop()
        if depth > limit:
            return True
        inner = container.values() if isinstance(container, dict) else container
        pending.extend((v, depth + 1) for v in inner if isinstance(v, dict | list))
    return False


def parse_json(body: bytes) -> Any:
    """Return the value a request body holds, read strictly.

    Raises:
        MalformedJsonError: not UTF-8 (a BOM, UTF-16, bytes no encoding reads),
            not JSON, or ``NaN``/``Infinity``.
        DuplicateKeyError: an object names a key twice.
        JsonTooDeepError: arrays and objects nest deeper than :data:`MAX_DEPTH`.
        InvalidInputError: an integer of more than 4,300 digits (valid JSON that
            no field takes).
    """
    if body.startswith(_BOM):
        msg = "the request body starts with a byte-order mark; send UTF-8 without one"
        raise MalformedJsonError(msg)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        msg = f"the request body is not UTF-8 (byte {e.start} cannot be read)"
        raise MalformedJsonError(msg) from e
    too_deep = f"the request body nests arrays and objects more than {MAX_DEPTH} deep"
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except json.JSONDecodeError as e:
        msg = f"the request body is not valid JSON: {e.msg} at character {e.pos}"
        raise MalformedJsonError(msg) from e
    except RecursionError as e:
        # The parser's C stack guard, at the interpreter's recursion limit: far past
        # MAX_DEPTH, and reached before any deep body could exhaust the stack.
        raise JsonTooDeepError(too_deep) from e
    except ValueError as e:
        if "integer string" not in str(e):
            raise
        msg = (
            "the request body holds an integer of more than 4,300 digits; "
            "no field takes a number that large"
        )
        raise InvalidInputError(msg) from e
    # Only a body with more brackets than the limit can nest past it: most bodies
    # skip the walk.
    if body.count(b"[") + body.count(b"{") > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
        raise JsonTooDeepError(too_deep)
    return value


def is_json_media_type(content_type: str | None) -> bool:
    """Return whether a ``Content-Type`` names JSON, as FastAPI decides to parse a body
    (``application/json`` or any ``application/*+json``)."""
    if not content_type:
        return False
    media_type = content_type.split(";", 1)[0].strip().lower()
    if not media_type.startswith("application/"):
        return False
    subtype = media_type.removeprefix("application/")
    return subtype == "json" or subtype.endswith("+json")
