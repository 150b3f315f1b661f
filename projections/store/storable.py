"""Text PostgreSQL can store, made from text the log may hold.

The log keeps each event as bytes, so it holds any string a caller ever
sent, including U+0000 (refused at the API's edge only since issue 17) and
lone surrogates. PostgreSQL's ``text`` refuses both and ``jsonb`` refuses
``\\u0000``, so a read model that stored them verbatim would fail on that
memory forever (drains, rebuild, verify).

Read models therefore store such a string with each of those code points
replaced by U+FFFD (the replacement character): deterministically, so the
drains, rebuild and verify compute the same row, and visibly, so a reader
can tell that something was replaced. The log itself, history and export
keep the original.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar, cast

__all__ = ["REPLACEMENT", "storable", "storable_text"]

REPLACEMENT = "\ufffd"
"""What a character PostgreSQL cannot store becomes in a read model."""

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

_T = TypeVar("_T")


def storable_text(text: str) -> str:
    """Return ``text`` with U+0000 and lone surrogates replaced by :data:`REPLACEMENT`."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def storable(value: _T) -> _T:
    """Return ``value`` with :func:`storable_text` applied to every string in it.

    Strings inside tuples, lists, sets, dicts (keys too) and dataclass fields
    are replaced; anything else is returned as it is. Values that need no
    replacement come back unchanged (equal, and of the same type).
    """
    return cast(_T, _storable(value))


def _storable(value: Any) -> Any:
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, tuple):
        items = map(_storable, value)
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_storable(v) for v in value]
    if isinstance(value, set | frozenset):
        return type(value)(_storable(v) for v in value)
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _storable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value
