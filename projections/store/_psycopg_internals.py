"""The one place that reaches under psycopg's public API: its adapters' ``Transformer``,
its connection's lock, and errors made from a libpq result.

What it uses (psycopg 3.2-3.3):

- ``psycopg.adapt.Transformer`` (the C one of ``psycopg-binary`` where installed):
  ``Transformer(conn)``, ``dump_sequence(params, formats)`` with the ``types`` and
  ``formats`` it leaves, ``set_pgresult(result)`` and ``load_rows(0, n, tuple)``:
  the parameters dumped and rows loaded by the connection's own adapters, as
  psycopg's cursors do, but without a cursor;
- ``Connection.lock``, the lock psycopg's own calls hold while they use the
  connection, held while :mod:`palimpsest.projections.store.queued` drives the
  connection's libpq handle (``Connection.pgconn``, documented) itself;
- ``psycopg.errors.error_from_result``: the exception psycopg would raise for a
  refused statement's result.

Why: :func:`~palimpsest.projections.store.queued.send_queued` sends a transaction's
statements with libpq's own calls, one each, where psycopg's pipeline cost
about 33 microseconds of Python more per statement than PostgreSQL takes to run
a small one: a fifth less CPU a write, +16% writes/s for eight writers in one
process (docs/benchmarks.md, "Writes sent through libpq's pipeline").

What breaks if psycopg changes them: a missing or renamed name fails at import
or on the first write; a ``Transformer`` whose ``types``/``formats`` no longer
follow ``dump_sequence`` sends parameters PostgreSQL refuses or misreads; a lock
psycopg no longer holds lets another thread's statement interleave with a
queued transaction on one connection. ``tests/contracts/test_psycopg_internals.py``
fails on each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.adapt import Transformer

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.abc import Buffer
    from psycopg.adapt import PyFormat
    from psycopg.pq.abc import PGconn, PGresult

__all__ = ["Dumped", "error_of", "libpq_of", "params_dumper", "rows_loader"]

Dumped = tuple["Sequence[Buffer | None]", "Sequence[int] | None", "Sequence[int] | None"]
"""A statement's parameters as libpq takes them: values, type oids and formats."""


def params_dumper(conn: Connection[Any]) -> Callable[[Sequence[Any], Sequence[PyFormat]], Dumped]:
    """Return a function that dumps a statement's parameters in the given formats with
    ``conn``'s adapters (one ``Transformer``, its dumpers kept across statements)."""
    tx = Transformer(conn)

    def dump(params: Sequence[Any], formats: Sequence[PyFormat]) -> Dumped:
        values = tx.dump_sequence(params, formats)
        return values, tx.types, list(tx.formats or ())

    return dump


def rows_loader(conn: Connection[Any]) -> Callable[[PGresult], list[tuple[Any, ...]]]:
    """Return a function that loads a result's rows, each a tuple, with ``conn``'s
    adapters (as a cursor's ``fetchall`` would)."""
    tx = Transformer(conn)

    def load(result: PGresult) -> list[tuple[Any, ...]]:
        tx.set_pgresult(result)
        return tx.load_rows(0, result.ntuples, tuple)

    return load


@contextmanager
def libpq_of(conn: Connection[Any]) -> Iterator[PGconn]:
    """Yield ``conn``'s libpq handle, holding the lock psycopg's own calls take on it:
    no psycopg call on ``conn`` (another thread's, or the pool's check) runs meanwhile."""
    with conn.lock:
        yield conn.pgconn


def error_of(conn: Connection[Any], result: PGresult) -> psycopg.Error:
    """Return the exception psycopg raises for ``result``, a refused statement's (its
    class by SQLSTATE, ``sqlstate`` and ``diag`` set)."""
    return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)
