"""Arrays of a known element type, sent to PostgreSQL in binary in one step.

psycopg dumps a plain ``list`` by looking for its elements' dumper on every
statement (scanning the list, then upgrading a generic dumper to one for that
element type), then dumps each element through it: about 5 microseconds an
array here, and a single write sends fourteen. The lists below say their
element type, so psycopg finds their dumper by class at once, and the dumper
builds the whole array in one join. Pass one wherever a statement casts the
parameter to that array type (``%b::uuid[]``, say); ``None`` elements are
sent as SQL ``NULL``, and an element the type cannot hold raises
``psycopg.DataError`` as the statement is executed, before it is sent.

The dumpers are registered on psycopg's global adapters when this module is
imported, so every connection made afterwards knows them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
from psycopg import postgres
from psycopg.adapt import Buffer, Dumper
from psycopg.pq import Format

from palimpsest.projections.store.ids import as_uuid

__all__ = ["BoolArray", "ByteaArray", "Int8Array", "TextArray", "UuidArray"]


class UuidArray(list[UUID | str | None]):
    r"""A ``uuid[]`` parameter (of ``UUID``\ s, or their text)."""


class Int8Array(list[int | None]):
    """A ``bigint[]`` parameter."""


class TextArray(list[str | None]):
    """A ``text[]`` parameter."""


class ByteaArray(list[bytes | None]):
    """A ``bytea[]`` parameter."""


class BoolArray(list[bool | None]):
    """A ``boolean[]`` parameter."""


# The binary array format: dimensions, whether any element is NULL, the element
# type; then per dimension its length and lower bound; then each element as its
# length (-1 for NULL) and its bytes.
_EMPTY = struct.Struct("!iiI")
_HEAD = struct.Struct("!iiIii")
_LENGTH = struct.Struct("!i")
_NULL = _LENGTH.pack(-1)
_INT8 = struct.Struct("!q")


def _array_dumper(element: str, encode: Callable[[Any, str], bytes]) -> type[Dumper]:
    """Return a binary dumper of one-dimensional arrays of the PostgreSQL type
    ``element``, each non-NULL element encoded by ``encode(value, encoding)``."""
    info = postgres.types[element]
    element_oid, array_oid = info.oid, info.array_oid

    class ArrayDumper(Dumper):
        format = Format.BINARY
        # Set per instance, not on the class: a class oid would register the dumper
        # by oid too, in place of psycopg's own (which binary COPY looks up).

        def __init__(self, cls: type, context: Any = None) -> None:
            super().__init__(cls, context)
            self.oid = array_oid
            # As psycopg's own text dumper: the connection's encoding (SQL_ASCII as UTF-8).
            encoding = self.connection.info.encoding if self.connection else "utf-8"
            self._encoding = encoding if encoding != "ascii" else "utf-8"

        def dump(self, obj: list[Any]) -> Buffer:
            if not obj:
                return _EMPTY.pack(0, 0, element_oid)
            encoding = self._encoding
            parts = [_HEAD.pack(1, 0, element_oid, len(obj), 1)]
            has_null = 0
            try:
                for value in obj:
                    if value is None:
                        has_null = 1
                        parts.append(_NULL)
                    else:
                        data = encode(value, encoding)
                        parts.append(_LENGTH.pack(len(data)))
                        parts.append(data)
            except (ValueError, TypeError, AttributeError, struct.error) as e:
                # A value the element type cannot hold is refused as the database would
                # refuse it: one write's error, never its whole group's.
                msg = f"not a {element} array element: {value!r} ({e})"
                raise psycopg.DataError(msg) from e
            if has_null:
                parts[0] = _HEAD.pack(1, 1, element_oid, len(obj), 1)
            return b"".join(parts)

    ArrayDumper.__name__ = ArrayDumper.__qualname__ = f"{element.capitalize()}ArrayDumper"
    return ArrayDumper


for _cls, _element, _encode in (
    (UuidArray, "uuid", lambda value, _: as_uuid(value).bytes),
    (Int8Array, "int8", lambda value, _: _INT8.pack(value)),
    (TextArray, "text", lambda value, encoding: value.encode(encoding)),
    (ByteaArray, "bytea", lambda value, _: bytes(value)),
    (BoolArray, "bool", lambda value, _: b"\x01" if value else b"\x00"),
):
    psycopg.adapters.register_dumper(_cls, _array_dumper(_element, _encode))
