"""A transaction queued in Python, then sent through libpq's pipeline in one round trip.

:func:`~palimpsest.projections.store._pipelined.pipelined_transaction` sends a transaction
through psycopg's cursors in pipeline mode, and psycopg's Python cost a write
more per statement (about 33 microseconds here) than PostgreSQL takes to run a
small one. Here the statements are first composed on :class:`QueuingCursor`\\ s
by the same code that would run them on a cursor, then :func:`send_queued`
sends ``BEGIN``, them and ``COMMIT`` with libpq's own calls: per statement,
its parameters' dump (psycopg's adapters, the same formats) and one call.

Only a transaction that reads no answer before its ``COMMIT`` can be sent so:
code that asks a queuing cursor for an answer gets :class:`UnqueueableError`,
and its transaction is sent through psycopg instead. Answers that are needed
only once the transaction has ended (a read's rows, a claim's ids) are asked
for in advance (:meth:`QueuingCursor.answer`), and filled in after it is sent
(:func:`fill_answers`).
"""

from __future__ import annotations

import re
import select
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NoReturn, Self

import psycopg
from psycopg.adapt import PyFormat
from psycopg.pq import ConnStatus, ExecStatus, TransactionStatus

from palimpsest.projections.store._pipelined import CommitUnknownError, connection_lost
from palimpsest.projections.store._psycopg_internals import (
    Dumped,
    error_of,
    libpq_of,
    params_dumper,
    rows_loader,
)

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.abc import Buffer, Params, Query
    from psycopg.pq.abc import PGconn, PGresult

__all__ = ["Answer", "Queued", "QueuingCursor", "UnqueueableError", "fill_answers", "send_queued"]


class UnqueueableError(Exception):
    """A transaction cannot be sent by :func:`send_queued`: a statement queued on a
    :class:`QueuingCursor` was asked for its answer within it (answers come only once
    the whole transaction is sent), or a statement is not in the form it takes."""


Queued = tuple[bytes, Sequence[Any] | None]
"""A statement (rendered, with ``%s``/``%b``/``%t`` placeholders) and its parameters
(None: sent as it is, as psycopg sends a statement without parameters)."""


def _unqueueable(*_: object, **__: object) -> NoReturn:
    raise UnqueueableError("a queued statement has no answer before it is sent")


class Answer:
    """The rows a statement queued on a :class:`QueuingCursor` answered, there once its
    transaction was sent (:meth:`QueuingCursor.answer`)."""

    __slots__ = ("_rows",)

    def __init__(self) -> None:
        self._rows: list[tuple[Any, ...]] | None = None

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        """The statement's rows, each a tuple in its columns' order, loaded by the
        connection's adapters.

        Raises:
            UnqueueableError: its transaction was not sent (yet), or was refused.
        """
        if self._rows is None:
            _unqueueable()
        return self._rows


class QueuingCursor(psycopg.Cursor[Any]):
    """A cursor that queues what it is given to execute, for :func:`send_queued`.

    Code that writes through a cursor runs unchanged on one, so a transaction's
    statements are composed in one place whichever way they are sent. Whatever
    would answer, or run a statement at once (``executemany``, ``copy``,
    ``stream``), raises :class:`UnqueueableError`.
    """

    def __init__(self, connection: Connection[Any], queue: list[Queued]) -> None:
        super().__init__(connection)
        self.queue = queue
        self.index: int | None = None
        """The queue position of the last statement queued on this cursor."""
        self.answers: list[tuple[int, Answer]] = []
        """The answers asked for, each with its statement's queue position."""

    def execute(
        self,
        query: Query,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        """Queue ``query`` with ``params`` (``prepare`` is the connection's choice here).

        Raises:
            UnqueueableError: ``query`` is not rendered (bytes), or ``params`` are named,
                or ``binary`` results are asked for.
        """
        if self.closed:
            # Its transaction was sent, or abandoned: nothing more would ever be sent.
            raise psycopg.InterfaceError("the queuing cursor is closed")
        if not isinstance(query, bytes) or isinstance(params, Mapping) or binary:
            msg = "only rendered statements with positional parameters are queued"
            raise UnqueueableError(msg)
        self.index = len(self.queue)
        self.queue.append((query, params))
        return self

    def answer(self) -> Answer:
        """Return where the rows of the statement queued last on this cursor will be
        once its transaction is sent (:func:`fill_answers`).

        Raises:
            UnqueueableError: nothing was queued on this cursor.
        """
        if self.index is None:
            msg = "no statement was queued on this cursor"
            raise UnqueueableError(msg)
        answer = Answer()
        self.answers.append((self.index, answer))
        return answer

    fetchone = fetchall = fetchmany = scroll = executemany = copy = stream = _unqueueable

    def __iter__(self) -> Self:
        """Raise :class:`UnqueueableError`: a queued statement has no rows yet."""
        _unqueueable()


_PLACEHOLDER = re.compile(rb"%(%|s|b|t)")
_PREPARED_PER_CONNECTION = 100
"""Statements :func:`send_queued` keeps prepared on one connection; others go unnamed."""
_SEEN_PER_CONNECTION = 1000
"""Statements :func:`send_queued` remembers having sent once on one connection."""


@lru_cache(maxsize=512)
def _converted(query: bytes) -> tuple[bytes, tuple[PyFormat, ...]]:
    """Return ``query`` with its placeholders numbered (``$1``...) and their formats."""
    formats: list[PyFormat] = []

    def number(match: re.Match[bytes]) -> bytes:
        if match.group(1) == b"%":
            return b"%"
        formats.append(PyFormat(match.group(1).decode()))
        return b"$%d" % len(formats)

    return _PLACEHOLDER.sub(number, query), tuple(formats)


_Key = tuple[bytes, tuple[int, ...] | None]
"""A prepared statement's command and parameter types."""


class _Prepared:
    """The statements :func:`send_queued` prepared on one connection, by command and
    parameter types: a statement is prepared the second time it is sent.

    A prepared statement outlives the transaction that prepared it, refused or not,
    so every name whose prepare succeeded is kept. psycopg deallocates every
    statement on the connection when it rolls back a transaction in which it holds
    prepared statements of its own: :func:`send_queued` then finds one of these gone,
    and forgets them all.
    """

    def __init__(self) -> None:
        self.names: dict[_Key, bytes] = {}
        self.seen: set[_Key] = set()
        self._made = 0

    def room(self) -> bool:
        """Whether another statement may be prepared on the connection."""
        return len(self.names) < _PREPARED_PER_CONNECTION

    def new_name(self) -> bytes:
        """Return a name no statement prepared on the connection had (names are not
        used again: one whose prepare was skipped may be known to the server or not)."""
        self._made += 1
        return b"_palimpsest_%d" % self._made


_prepared: weakref.WeakKeyDictionary[Connection[Any], _Prepared] = weakref.WeakKeyDictionary()

_Send = tuple[bytes, Sequence["Buffer | None"] | None, Sequence[int] | None, Sequence[int] | None]
"""A statement as libpq takes it: its command, values, types and formats."""


def send_queued(
    conn: Connection[Any],
    queued: Sequence[Queued],
    *,
    begin: bytes = b"BEGIN",
    again: bool = False,
    sent: Callable[[], None] | None = None,
) -> list[PGresult]:
    """Send ``begin``, the ``queued`` statements and ``COMMIT`` in one round trip,
    through libpq's pipeline; return each queued statement's result, in order.

    Every parameter is dumped before anything is sent. A statement sent again is
    prepared on the connection. ``again``: this is the second try of a
    transaction refused because psycopg had deallocated a statement prepared here.
    ``sent`` is called once all of it, ``COMMIT`` included, is on its way, before
    the answers are waited for (it may be called again if the transaction is).

    Raises:
        psycopg.Error: PostgreSQL refused a statement, and the transaction was rolled
            back; or a parameter could not be dumped (so may what a dumper raises),
            and nothing was sent.
        CommitUnknownError: the connection failed, or its backend was ended, once
            ``COMMIT`` was being sent.
    """
    assert conn.autocommit, "a queued transaction sends its own BEGIN"
    sends = _dumped(params_dumper(conn), queued)
    prepared = _prepared.get(conn) or _prepared.setdefault(conn, _Prepared())
    backend_pid = conn.info.backend_pid  # (libpq forgets it once the connection fails)
    with libpq_of(conn) as pgconn:
        pgconn.enter_pipeline_mode()
        try:
            answer_at, preparing = _send(pgconn, prepared, begin, sends)
            results = _commit(pgconn, sent)
            for key, (at, name) in preparing.items():
                if results[at].status == ExecStatus.COMMAND_OK:
                    prepared.names[key] = name
            refused = next((r for r in results if r.status == ExecStatus.FATAL_ERROR), None)
            if refused is not None and pgconn.transaction_status == TransactionStatus.INERROR:
                # Rolled back here, not by psycopg, which would deallocate every
                # statement prepared on the connection (its own and these).
                pgconn.send_query_params(b"ROLLBACK", None)
                pgconn.pipeline_sync()
                _exchange(pgconn)
        finally:
            _leave_pipeline(pgconn)
    if refused is None:
        return [results[at] for at in answer_at]
    error = error_of(conn, refused)
    if connection_lost(conn, error):
        # Its backend was ended (an administrator, a shutdown): COMMIT, sent with the
        # rest, may have run before it, its answer lost with the connection.
        msg = f"the connection failed after COMMIT was sent: {error}"
        raise CommitUnknownError(msg, backend_pid) from error
    if isinstance(error, psycopg.errors.InvalidSqlStatementName) and not again:
        # One of these was deallocated by psycopg since: nothing of the transaction
        # ran past it, so it is sent again, with its statements prepared anew.
        prepared.names.clear()
        return send_queued(conn, queued, begin=begin, again=True, sent=sent)
    raise error


def fill_answers(queuing: QueuingCursor, results: Sequence[PGresult]) -> None:
    """Fill in the answers asked of ``queuing`` from ``results`` (what :func:`send_queued`
    returned for its queue)."""
    if not queuing.answers:
        return
    load = rows_loader(queuing.connection)
    for at, answer in queuing.answers:
        answer._rows = load(results[at])


def _dumped(
    dump: Callable[[Sequence[Any], Sequence[PyFormat]], Dumped], queued: Sequence[Queued]
) -> list[_Send]:
    """Return ``queued`` as libpq takes it: placeholders numbered, parameters dumped
    by ``dump`` (a statement without parameters as it is, as psycopg sends it)."""
    sends: list[_Send] = []
    for query, params in queued:
        if params is None:
            sends.append((query, None, None, None))
            continue
        command, formats = _converted(query)
        if formats:
            sends.append((command, *dump(params, formats)))
        else:
            sends.append((command, None, None, None))
    return sends


def _send(
    pgconn: PGconn, prepared: _Prepared, begin: bytes, sends: Sequence[_Send]
) -> tuple[list[int], dict[_Key, tuple[int, bytes]]]:
    """Queue ``begin`` and ``sends`` on ``pgconn`` (in pipeline mode). libpq may send
    some of it already; nothing commits before :func:`_commit`.

    Returns:
        Where each statement's result will be among the results, and the statements
        prepared on the way, each with where its prepare's result will be.
    """
    pgconn.send_query_params(begin, None)
    answer_at: list[int] = []
    preparing: dict[_Key, tuple[int, bytes]] = {}
    expected = 1
    for command, values, types, formats in sends:
        key = (command, tuple(types) if types is not None else None)
        name = prepared.names.get(key) or preparing.get(key, (0, None))[1]
        if name is None and key in prepared.seen and prepared.room():
            name = prepared.new_name()
            pgconn.send_prepare(name, command, types)
            preparing[key] = (expected, name)
            expected += 1
        if len(prepared.seen) < _SEEN_PER_CONNECTION:
            prepared.seen.add(key)
        answer_at.append(expected)
        expected += 1
        if name is None:
            pgconn.send_query_params(command, values, types, formats)
        else:
            pgconn.send_query_prepared(name, values, formats)
    return answer_at, preparing


def _commit(pgconn: PGconn, sent: Callable[[], None] | None) -> list[PGresult]:
    """Send ``COMMIT`` and a sync after what is queued on ``pgconn``, call ``sent``
    (if any) once all of it is sent; return every result up to the sync.

    Raises:
        CommitUnknownError: the connection failed from the moment ``COMMIT`` may have
            reached the server (libpq sends as its buffer fills).
    """
    backend_pid = pgconn.backend_pid
    try:
        pgconn.send_query_params(b"COMMIT", None)
        pgconn.pipeline_sync()
        return _exchange(pgconn, sent)
    except psycopg.OperationalError as e:
        if pgconn.status == ConnStatus.BAD:
            msg = f"the connection failed after COMMIT was sent: {e}"
            raise CommitUnknownError(msg, backend_pid) from e
        raise


def _leave_pipeline(pgconn: PGconn) -> None:
    """Take ``pgconn`` out of pipeline mode; close it if answers were left unread (the
    sending was interrupted): its state is then unknown, and it must not be reused."""
    if pgconn.status == ConnStatus.OK and pgconn.pipeline_status:
        try:
            pgconn.exit_pipeline_mode()
        except psycopg.OperationalError:
            pgconn.finish()


def _exchange(pgconn: PGconn, sent: Callable[[], None] | None = None) -> list[PGresult]:
    """Flush what is queued on ``pgconn``, call ``sent`` (if any), and read every result
    up to the pipeline's sync (included), waiting on the socket without holding the
    interpreter."""
    poll = select.poll()
    poll.register(pgconn.socket, select.POLLIN | select.POLLOUT)
    while pgconn.flush():  # 1: something is left to send
        if any(event & select.POLLIN for _, event in poll.poll()):
            pgconn.consume_input()  # answers may fill the socket while we send
    poll.modify(pgconn.socket, select.POLLIN)
    if sent is not None:
        sent()
    results: list[PGresult] = []
    while True:
        pgconn.consume_input()
        while pgconn.is_busy():
            poll.poll()
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:  # the end of one statement's results
            continue
        results.append(result)
        if result.status == ExecStatus.PIPELINE_SYNC:
            return results
