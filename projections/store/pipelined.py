"""A transaction sent to PostgreSQL in one round trip, ``COMMIT`` included."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import psycopg

if TYPE_CHECKING:
    from psycopg import Connection, Pipeline

__all__ = ["pipelined_transaction"]


@contextmanager
def pipelined_transaction(conn: Connection[Any]) -> Iterator[Pipeline]:
    """Run the block's statements in one transaction whose ``BEGIN``, statements and
    ``COMMIT`` are sent together; yield the pipeline.

    psycopg's ``conn.transaction()`` in pipeline mode waits for the block's
    answers before it sends ``COMMIT``: a second round trip, with every lock
    the transaction took (the events table's, a belief's row) held while this
    process, maybe waiting for the interpreter, reads them. Here ``BEGIN`` and
    ``COMMIT`` are statements of the pipeline: PostgreSQL runs the block and
    commits without waiting for this process. A statement whose answer the
    block reads (a ``fetch`` on its cursor, ``pipeline.sync()``) still waits for
    it, inside the transaction.

    A statement PostgreSQL refuses makes it skip the rest, ``COMMIT`` included;
    its error is raised at the next read, at the end of the block at the
    latest, once the transaction is rolled back (as it is for any exception of
    the block). ``conn`` must be in autocommit mode, as the pool's connections
    are: psycopg then sends no ``BEGIN`` of its own.
    """
    try:
        with conn.pipeline() as pipeline:
            conn.execute(b"BEGIN", prepare=False)
            yield pipeline
            conn.execute(b"COMMIT", prepare=False)
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            # Ends a transaction left open or failed (nothing if it is over), and
            # forgets the statements prepared in it, as psycopg's own rollback does.
            conn.rollback()
        raise
