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
from collections.abc import Callable
from datetime import datetime
from functools import cache
from operator import attrgetter
from typing import Any, TypeVar, cast
from uuid import UUID

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
    are replaced; anything else is returned as it is. A string of a subclass
    (an enum) becomes a plain ``str``, and a container of a subclass of
    ``tuple``, ``list`` or ``dict`` the plain container (named tuples, sets and
    frozensets keep their types).

    A value with nothing to replace comes back as it is, the same object:
    every write's dependency rows pass through here, nearly none with anything
    to replace, and rebuilding them cost 28-36 microseconds a write, against
    5-10 to check them.
    """
    return value if _is_storable(value) else cast(_T, _storable(value))


def _is_storable(value: Any) -> bool:
    """Whether :func:`storable` would give back ``value`` as it is (equal, and of the
    same type throughout): no string in it to replace, none of a subclass of
    ``str``, and no container of a subclass that rebuilding makes plain."""
    kind: type = type(value)
    if kind is str:
        return _UNSTORABLE.search(value) is None
    if kind in _PLAIN:
        return True
    if kind in _KEPT_CONTAINERS or isinstance(value, set | frozenset) or _is_named_tuple(value):
        return all(map(_is_storable, value))
    if kind is dict:
        return all(_is_storable(k) and _is_storable(v) for k, v in value.items())
    if isinstance(value, str | tuple | list | dict):
        return False  # a subclass, which the rebuild turns into its plain type
    fields = _fields_getter(kind)
    if fields is None:
        return True
    # Fields that are None or empty (most of a write's dependency rows) skip the call;
    # by type, so that no other value's truth is asked.
    return all(
        _is_storable(v)
        for v in fields(value)
        if v is not None and not (type(v) in _KEPT_CONTAINERS and not v)
    )


def _is_named_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


_PLAIN = frozenset({type(None), bool, int, float, UUID, datetime, bytes})
"""Types that hold no string: what most of a write's dependency rows are made of."""

_KEPT_CONTAINERS = frozenset({tuple, list, set, frozenset})
"""Containers whose rebuild has their own type."""


@cache
def _fields_getter(kind: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """What reads the fields of a dataclass as a tuple (None for another type): made once
    per type, as every write's dependency rows are checked field by field."""
    if not dataclasses.is_dataclass(kind):
        return None
    names = [f.name for f in dataclasses.fields(kind)]
    if len(names) == 1:  # attrgetter of one name answers the value, not a tuple
        return lambda value: (getattr(value, names[0]),)
    return attrgetter(*names) if names else lambda _: ()


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
