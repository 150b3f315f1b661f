"""psycopg's internals behind :mod:`palimpsest.projections.store._psycopg_internals` still
do what the queued transactions rely on: parameters dumped and rows loaded as psycopg's
cursors do them, a lock psycopg's own calls wait for, the error psycopg raises.

Each test drives the internal for real on PostgreSQL; the last names what is used, so
that an upgrade that renames or reshapes it fails here, not in a write."""

from __future__ import annotations

import inspect
import threading
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import psycopg
import psycopg.errors
import pytest
from psycopg.adapt import PyFormat, Transformer
from psycopg.conninfo import make_conninfo
from psycopg.pq import ExecStatus
from psycopg.types.json import Jsonb

from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store._psycopg_internals import (
    error_of,
    libpq_of,
    params_dumper,
    rows_loader,
)
from palimpsest.projections.store.arrays import Int8Array, UuidArray

_PARAMS: tuple[Any, ...] = (
    7,
    2**40,
    "naïve text",
    UUID("12345678-1234-5678-1234-567812345678"),
    datetime(2026, 12, 6, 19, 0, tzinfo=UTC),
    b"\x00\xffbytes",
    None,
    True,
    Decimal("1.25"),
    ["a", "b"],
    Int8Array([1, 2, 3]),
    UuidArray([UUID(int=1), UUID(int=2)]),
    Jsonb({"k": [1, "v"]}),
)
_SELECT = (
    "SELECT {0}::int8, {1}::int8, {2}::text, {3}::uuid, {4}::timestamptz, {5}::bytea,"
    " {6}::text, {7}::bool, {8}::numeric, {9}::text[], {10}::int8[], {11}::uuid[], {12}::jsonb"
)


@pytest.fixture
def conn(runtime: Runtime) -> Any:
    with psycopg.connect(
        make_conninfo("", **runtime.database.owner_conninfo()), autocommit=True
    ) as conn:
        yield conn


@pytest.mark.parametrize("form", [PyFormat.AUTO, PyFormat.BINARY, PyFormat.TEXT])
def test_parameters_dumped_outside_a_cursor_read_back_as_a_cursors_do(
    conn: psycopg.Connection[Any], form: PyFormat
) -> None:
    # Given the parameters the write path sends (our arrays, JSON, text, ids, times)
    placeholder = {PyFormat.AUTO: "%s", PyFormat.BINARY: "%b", PyFormat.TEXT: "%t"}[form]
    by_cursor = conn.execute(
        _SELECT.format(*[placeholder] * len(_PARAMS)).encode(), _PARAMS
    ).fetchall()
    # When they are dumped by the adapter and sent with libpq's own call
    values, types, formats = params_dumper(conn)(_PARAMS, [form] * len(_PARAMS))
    command = _SELECT.format(*(f"${i + 1}" for i in range(len(_PARAMS)))).encode()
    with libpq_of(conn) as pgconn:
        result = pgconn.exec_params(command, values, types, formats)
    # Then PostgreSQL reads them as it reads a cursor's, and they load back alike
    assert result.status == ExecStatus.TUPLES_OK, result.get_error_message()
    assert rows_loader(conn)(result) == by_cursor
    assert by_cursor[0][2] == "naïve text" and by_cursor[0][10] == [1, 2, 3]


def test_psycopgs_own_calls_wait_while_the_adapter_holds_the_connection(
    conn: psycopg.Connection[Any],
) -> None:
    started, done = threading.Event(), threading.Event()

    def other_thread() -> None:
        started.set()
        conn.execute("SELECT 1")
        done.set()

    with libpq_of(conn) as pgconn:
        thread = threading.Thread(target=other_thread)
        thread.start()
        assert started.wait(10)
        # psycopg's execute must not touch the connection while we drive it: it
        # would interleave its statement with a queued transaction's.
        assert not done.wait(0.3), "psycopg ran a statement on the connection meanwhile"
        assert pgconn.transaction_status is not None
    thread.join(10)
    assert done.is_set()


def test_a_refused_statements_result_becomes_the_error_psycopg_raises(
    conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(psycopg.Error) as raised:
        conn.execute("SELECT 1 / 0")
    with libpq_of(conn) as pgconn:
        result = pgconn.exec_params(b"SELECT 1 / 0", None)
    assert result.status == ExecStatus.FATAL_ERROR
    error = error_of(conn, result)
    assert type(error) is type(raised.value) is psycopg.errors.DivisionByZero
    assert error.sqlstate == "22012"
    assert error.diag.message_primary == raised.value.diag.message_primary


def test_the_internals_keep_their_names_and_signatures() -> None:
    # The pure-Python Transformer is the C one's specification (psycopg keeps them alike).
    from psycopg import _py_transformer

    python = _py_transformer.Transformer
    assert list(inspect.signature(python.__init__).parameters) == ["self", "context"]
    assert list(inspect.signature(python.dump_sequence).parameters) == [
        "self",
        "params",
        "formats",
    ]
    assert list(inspect.signature(python.load_rows).parameters) == [
        "self",
        "row0",
        "row1",
        "make_row",
    ]
    assert list(inspect.signature(python.set_pgresult).parameters)[:2] == ["self", "result"]
    for name in ("dump_sequence", "types", "formats", "set_pgresult", "load_rows"):
        assert hasattr(Transformer, name), name
    assert list(inspect.signature(psycopg.errors.error_from_result).parameters) == [
        "result",
        "encoding",
    ]
    # The connection's lock is the one its cursors take to run a statement.
    assert "with self._conn.lock:" in inspect.getsource(psycopg.Cursor.execute)
