"""A transaction sent to PostgreSQL in one round trip, ``COMMIT`` included; and how a
write's transaction, sent so or not, tells that its ``COMMIT``'s answer was lost."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from psycopg import Connection, Pipeline

__all__ = ["CommitUnknownError", "connection_lost", "pipelined_transaction", "told_transaction"]

_CONNECTION_ENDED = ("08", "57P")
"""SQLSTATE prefixes of an error that ends the connection (a connection exception; the
backend terminated, the server shutting down, the database dropped, the session timed
out; not a cancelled statement, 57014): whatever the session sent last is not answered."""


class CommitUnknownError(psycopg.OperationalError):
    """The connection failed after the transaction's ``COMMIT`` was sent.

    PostgreSQL may have committed it, or may still: a backend that received
    the whole transaction runs it to the end even when the client is gone (one
    waiting for a lock commits once it has it). Trying the transaction again
    before it is over may record it twice. ``backend_pid`` is the backend that
    received it. A subclass of psycopg's ``OperationalError``, so that callers
    for which it changes nothing (a publish, which is idempotent) see the
    error they saw before.
    """

    def __init__(self, message: str, backend_pid: int) -> None:
        super().__init__(message)
        self.backend_pid = backend_pid


@contextmanager
def pipelined_transaction(conn: Connection[Any]) -> Iterator[Pipeline]:
    """Run the block's statements in one transaction whose ``BEGIN``, statements and
    ``COMMIT`` are sent together; yield the pipeline.

    psycopg's ``conn.transaction()`` in pipeline mode waits for the block's
    answers before it sends ``COMMIT``: a second round trip, with every lock
    the transaction took (the events table's, a belief's row) held while this
    process, maybe waiting for the interpreter, reads them. Here ``BEGIN`` and
    ``COMMIT`` are statements of the pipeline: the locks are held while
    PostgreSQL runs the statements and this process sends the last of them
    (each goes out as it is executed), never while PostgreSQL waits for this
    process to read answers. A statement whose answer the block reads (a
    ``fetch`` on its cursor, ``pipeline.sync()``) still waits for it, inside
    the transaction.

    A statement PostgreSQL refuses makes it skip the rest, ``COMMIT`` included;
    its error is raised at the next read, at the end of the block at the
    latest, once the transaction is rolled back (as it is for any exception of
    the block). ``conn`` must be in autocommit mode, as the pool's connections
    are: psycopg then sends no ``BEGIN`` of its own.

    Raises:
        CommitUnknownError: the connection failed once ``COMMIT`` was sent.
    """
    assert conn.autocommit, "a pipelined transaction sends its own BEGIN"
    backend_pid = conn.info.backend_pid
    committing = False
    try:
        with conn.pipeline() as pipeline:
            conn.execute(b"BEGIN", prepare=False)
            yield pipeline
            committing = True
            conn.execute(b"COMMIT", prepare=False)
    except (psycopg.OperationalError, psycopg.InterfaceError) as e:
        if committing and connection_lost(conn, e):
            msg = f"the connection failed after COMMIT was sent: {e}"
            raise CommitUnknownError(msg, backend_pid) from e
        with contextlib.suppress(psycopg.Error):
            conn.rollback()
        raise
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            # Ends a transaction left open or failed (nothing if it is over), and
            # forgets the statements prepared in it, as psycopg's own rollback does.
            conn.rollback()
        raise


@contextmanager
def told_transaction(conn: Connection[Any]) -> Iterator[None]:
    """psycopg's ``conn.transaction()``, but a connection lost once the block's
    statements ran (while ``COMMIT`` was sent or its answer read) raises
    :class:`CommitUnknownError`, not the error that says the connection failed:
    the transaction may have committed (psycopg's own error looks the same as one
    met before ``COMMIT``, after which trying again is safe).

    Raises:
        CommitUnknownError: the connection failed once ``COMMIT`` was being sent.
    """
    backend_pid = conn.info.backend_pid
    committing = False
    try:
        with conn.transaction():
            yield
            committing = True
    except (psycopg.OperationalError, psycopg.InterfaceError) as e:
        if committing and connection_lost(conn, e):
            msg = f"the connection failed after COMMIT was sent: {e}"
            raise CommitUnknownError(msg, backend_pid) from e
        raise


def connection_lost(conn: Connection[Any], error: psycopg.Error) -> bool:
    """Whether ``error`` means that ``conn``'s last statements may not be answered:
    the connection failed, or its backend was ended (``pg_terminate_backend``, a
    shutdown), rather than PostgreSQL answering them with a refusal.

    A backend ended by an administrator sends its error and closes the connection,
    which psycopg may not have marked broken yet when it raises that error.
    """
    ended = error.sqlstate is not None and error.sqlstate.startswith(_CONNECTION_ENDED)
    return conn.broken or conn.closed or ended
