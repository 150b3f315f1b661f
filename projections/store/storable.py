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
from collections.abc import Callable, Collection, Iterable
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
    every write's dependency rows and every belief document pass through
    here, nearly none with anything to replace, and rebuilding them cost
    28-36 microseconds a write, against 5-10 to check them. (Checking the
    benchmark store's 614 writes' rows and 20,000 belief documents took 0.25 s and
    0.24 s of CPU one value at a time, 0.09 s and 0.14 s as below.)
    """
    return value if _is_storable(value) else cast(_T, _storable(value))


def _is_storable(value: Any) -> bool:
    """Whether :func:`storable` would give back ``value`` as it is (equal, and of the
    same type throughout): no string in it to replace, none of a subclass of
    ``str``, and no container of a subclass that rebuilding makes plain.

    One loop over a stack of what is left to look at, not a call per value: a
    belief document holds about 40 values in 10 containers. The strings are
    gathered and searched once, joined: the search looks for single code points,
    which joining neither creates nor hides (Python never merges two lone
    surrogates into one character).
    """
    strings: list[str] = []
    add = strings.append
    left = [value]
    take, look_into = left.pop, left.extend
    while left:
        item = take()
        kind: type = type(item)
        if kind is str:
            add(item)
        elif kind in _PLAIN:
            continue
        elif kind is dict:
            look_into(item)
            look_into(item.values())
        elif kind in _KEPT_CONTAINERS or isinstance(item, set | frozenset):
            if len(item) <= _MANY or not _gather_many(item, strings, look_into):
                look_into(item)
        elif isinstance(item, str | tuple | list | dict):
            if not _is_named_tuple(item):
                return False  # a subclass, which the rebuild turns into its plain type
            look_into(item)
        else:
            fields = _fields_getter(kind)
            if fields is not None:
                look_into(fields(item))
    return _UNSTORABLE.search("".join(strings)) is None


_MANY = 16
"""From how many items a collection's kinds are found first, in one pass in C
(:func:`_gather_many`). Measured on the benchmark store (CPU): its 614 writes' rows
took 0.09 s so and 0.16 s item by item; its belief documents' small lists and
dicts 10% longer so than item by item."""


def _gather_many(
    items: Collection[Any], strings: list[str], look_into: Callable[[Iterable[Any]], None]
) -> bool:
    """Look at many ``items`` by kind, found in one pass in C: add their strings to
    ``strings`` if they are all plain values and plain strings; if they are all
    dataclasses of one type (a write's rows of one type), look at them column by
    column the same way, handing ``look_into`` the columns that hold anything else.
    Returns False, having done nothing, for other items (each is then looked at)."""
    kinds = set(map(type, items))
    if kinds <= _PLAIN_OR_TEXT:
        strings.extend(filter(_is_text, items))
        return True
    fields = _row_getter(next(iter(kinds))) if len(kinds) == 1 else None
    if fields is None:
        return False
    for column in zip(*map(fields, items), strict=True):
        if set(map(type, column)) <= _PLAIN_OR_TEXT:
            strings.extend(filter(_is_text, column))
        else:
            look_into(column)
    return True


def _is_named_tuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


_PLAIN = frozenset({type(None), bool, int, float, UUID, datetime, bytes})
"""Types that hold no string: what most of a write's dependency rows are made of."""

_PLAIN_OR_TEXT = _PLAIN | {str}

_is_text = str.__instancecheck__
"""Whether a value is a ``str``: only ever asked of plain values and plain strings
(:func:`_gather_many`), where that means exactly ``type(value) is str``."""

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


@cache
def _row_getter(kind: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """:func:`_fields_getter` of a type :func:`_is_storable` looks into field by field
    (a dataclass that is no ``str``, container or named tuple), else None."""
    plain = kind in _PLAIN or issubclass(kind, _NOT_ROWS)
    return None if plain else _fields_getter(kind)


_NOT_ROWS = (str, tuple, list, dict, set, frozenset)


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
