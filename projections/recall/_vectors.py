"""pgvector values in psycopg's binary format, without touching the pool's adapters.

A batch of embeddings sent as text costs a float-to-decimal conversion per
element on both sides (about a third of an indexing write). Binary is
pgvector's own layout: a 16-bit dimension, 16 unused bits, then big-endian
float32s. The dumper is registered on the cursor only, so no other query on
the pooled connection changes how it adapts values.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types import TypeInfo

__all__ = ["VectorValue", "binary_vectors"]


class VectorValue:
    """A vector to send to PostgreSQL as pgvector's ``vector``."""

    __slots__ = ("values",)

    def __init__(self, values: Sequence[float]) -> None:
        self.values = values

    def to_binary(self) -> bytes:
        """Return pgvector's binary representation."""
        return struct.pack(f">HH{len(self.values)}f", len(self.values), 0, *self.values)


_INFO: dict[tuple[str, int, str], TypeInfo] = {}
"""The vector type of each server and database (its oid differs between databases)."""


def binary_vectors(cur: Any) -> None:
    """Let ``cur`` send :class:`VectorValue` (and lists of them) in binary."""
    where = (cur.connection.info.host, cur.connection.info.port, cur.connection.info.dbname)
    info = _INFO.get(where)
    if info is None:
        info = TypeInfo.fetch(cur.connection, "vector")
        if info is None:
            msg = "the vector type is missing: is the pgvector extension installed?"
            raise RuntimeError(msg)
        _INFO[where] = info
    info.register(cur)
    oid = info.oid

    class _VectorDumper(Dumper):
        format = Format.BINARY

        def __init__(self, cls: type, context: Any = None) -> None:
            super().__init__(cls, context)
            self.oid = oid

        def dump(self, obj: VectorValue) -> bytes:
            return obj.to_binary()

    cur.adapters.register_dumper(VectorValue, _VectorDumper)
