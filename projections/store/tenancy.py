"""The tenant a unit of work runs for, and the transactions that enforce it.

Row-level security policies compare each row's ``tenant_id`` with the
``palimpsest.tenant_id`` setting. It is set with ``set_config(..., true)``,
which lasts only until the end of the transaction, so a pooled connection
never carries one tenant's setting into another's work.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.projections.store._pipelined import pipelined_transaction
from palimpsest.projections.store.queued import Queued, QueuingCursor, fill_answers, send_queued
from palimpsest.projections.store.sql import schema_query

if TYPE_CHECKING:
    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor

__all__ = [
    "PLAN_FOR_TENANT_SQL",
    "current_tenant",
    "known_tenants",
    "queued_transaction",
    "read_transaction",
    "run_unread",
    "set_tenant",
    "tenant_scope",
    "tenant_transaction",
]

_current_tenant: ContextVar[UUID | None] = ContextVar("palimpsest_tenant", default=None)

SET_TENANT_SQL = "SELECT set_config('palimpsest.tenant_id', %s, true)"


@lru_cache
def _settings_sql(*, commit: bool, durable: bool, planned_for_tenant: bool) -> str:
    """The one statement that sets up a :func:`tenant_transaction`: its tenant, then
    read-only or not waiting for the disk, then plans made for the tenant."""
    settings = ["set_config('palimpsest.tenant_id', %s, true)"]
    if not commit:
        settings.append("set_config('transaction_read_only', 'on', true)")
    elif not durable:
        settings.append("set_config('synchronous_commit', 'off', true)")
    if planned_for_tenant:
        settings.append(_PLANNED_FOR_TENANT)
    return "SELECT " + ", ".join(settings)


_PLANNED_FOR_TENANT = "set_config('plan_cache_mode', 'force_custom_plan', true)"

PLAN_FOR_TENANT_SQL = ("SELECT " + _PLANNED_FOR_TENANT).encode()
"""What plans the rest of a transaction's statements for its tenant, as
``planned_for_tenant`` does from its start (a statement whose plan is the same in
every tenant needs none, and planning costs more than running many)."""


@contextmanager
def tenant_scope(tenant_id: UUID) -> Iterator[None]:
    """Run the enclosed reads and writes for ``tenant_id``."""
    token = _current_tenant.set(tenant_id)
    try:
        yield
    finally:
        _current_tenant.reset(token)


def current_tenant() -> UUID | None:
    """Return the tenant of the enclosing :func:`tenant_scope`, if any."""
    return _current_tenant.get()


def set_tenant(curs: Cursor[Any], tenant_id: UUID | None) -> None:
    """Set the tenant for the rest of ``curs``'s transaction (none sees no rows)."""
    curs.execute(SET_TENANT_SQL, ("" if tenant_id is None else str(tenant_id),))


@contextmanager
def tenant_transaction(
    datastore: PostgresDatastore,
    tenant_id: UUID | None,
    *,
    commit: bool,
    pipelined: bool = False,
    durable: bool = True,
    planned_for_tenant: bool = False,
) -> Iterator[Cursor[Any]]:
    """Yield a cursor in a transaction that sees only ``tenant_id``'s rows (none
    when None).

    Without ``commit`` the transaction is read-only: a write in it fails. It ends
    in ``COMMIT``, which for a read-only transaction writes nothing: on
    ``ROLLBACK`` psycopg forgets every statement the connection prepared (and
    deallocates them), so reads that rolled back kept any statement from ever
    staying prepared, the write path's included.

    Each statement is a round trip of its own, unless ``pipelined``. With
    ``pipelined`` the
    statements are queued and sent with ``COMMIT`` in one round trip (a fetch
    waits for the answers so far, and an error surfaces at the next fetch, or at
    the end of the block at the latest). Pipeline mode costs more of this
    process's time per statement (about 60 microseconds more for a short read
    here), so it is for writes whose row locks must not be held across round
    trips: while they are, every writer of those rows waits for this process.
    In pipeline mode a cursor whose rows are read must run only the statement
    read (:func:`run_unread` runs the others). A transaction that needs no
    answer before it ends is sent whole by :func:`queued_transaction` instead.

    Without ``durable``, a transaction that commits returns before its record
    reaches the disk (``synchronous_commit`` off): for rows the drains derive
    from the log and would derive again if a crash lost them (a publish, a
    claim), and tuning state whose loss costs a little ranking (reads' access
    stamps); never for what a caller was told is done. A crash can lose only
    the last such commits, never part of one, and the first durable commit
    after them makes them durable too.

    With ``planned_for_tenant`` (the drains' claims, clean checks and quarantines;
    :data:`PLAN_FOR_TENANT_SQL` from a statement on: their publish), each
    statement is planned for this tenant, never from a plan kept for all. The
    planner folds the tenant into its estimates, so a plan made in a tenant of a
    few revisions reads the whole of a big tenant's
    (the claim's kept plan scanned the tenant's 50,000 rows for its ids: 2-5 ms
    a statement there, against 0.1 ms planned for it; docs/benchmarks.md).
    Planning costs more than running such a statement, so it is only for those
    whose kept plan was seen to do that.
    """
    tenant = "" if tenant_id is None else str(tenant_id)
    setting = _settings_sql(commit=commit, durable=durable, planned_for_tenant=planned_for_tenant)
    with (
        datastore.get_connection() as conn,
        pipelined_transaction(conn) if pipelined else conn.transaction(),
        conn.cursor() as curs,
    ):
        if pipelined:
            run_unread(curs, setting, (tenant,))
        else:  # answered before the caller's first statement is sent
            curs.execute(setting, (tenant,))
        yield curs


@contextmanager
def queued_transaction(
    datastore: PostgresDatastore,
    tenant_id: UUID | None,
    *,
    commit: bool,
    durable: bool = True,
    planned_for_tenant: bool = False,
) -> Iterator[QueuingCursor]:
    """Yield a cursor that queues the statements of a :func:`tenant_transaction`
    (same ``commit``, ``durable`` and ``planned_for_tenant``); once the block ends they
    are sent with ``BEGIN`` and ``COMMIT`` in one round trip, through libpq directly
    (:mod:`palimpsest.projections.store.queued`).

    Nothing is sent before the block ends, so no row lock waits for this process,
    and nothing at all if the block raises. The rows of a statement are read
    after the block, from the :class:`~palimpsest.projections.store.queued.Answer` that
    :meth:`~palimpsest.projections.store.queued.QueuingCursor.answer` returned just after it
    was queued; asking the cursor itself for them raises
    :class:`~palimpsest.projections.store.queued.UnqueueableError`. So it is for
    transactions that need no answer before they end: a write that reads
    nothing back (the drains' publish), a claim whose ids are used once it has
    committed, reads that do not depend on each other. Each round trip saved
    costs a drain pass less of both processes' time (docs/benchmarks.md).

    Without ``commit``, its statements read one snapshot (``REPEATABLE READ``, which
    costs a read-only transaction nothing): what a read's statements return agrees,
    as the events and the links of the facts the drains project must.

    Raises:
        eventsourcing.persistence.PersistenceError: as from ``datastore``'s
            connections, with psycopg's error as its cause: PostgreSQL refused a
            statement (the transaction was rolled back), a parameter could not be
            dumped (nothing was sent), or the connection failed
            (:class:`~palimpsest.projections.store._pipelined.CommitUnknownError` once ``COMMIT``
            was being sent, a read's too).
    """
    tenant = "" if tenant_id is None else str(tenant_id)
    setting = _settings_sql(commit=commit, durable=durable, planned_for_tenant=planned_for_tenant)
    begin = b"BEGIN" if commit else b"BEGIN ISOLATION LEVEL REPEATABLE READ"
    with datastore.get_connection() as conn:
        statements: list[Queued] = []
        with QueuingCursor(conn, statements) as queuing:  # closed: no statement after
            queuing.execute(setting.encode(), (tenant,))
            yield queuing
        fill_answers(queuing, send_queued(conn, statements, begin=begin))


def run_unread(curs: Cursor[Any], query: str, params: Sequence[Any] = ()) -> None:
    """Run ``query``, whose answer is never read, in ``curs``'s transaction, on a
    cursor of its own.

    In pipeline mode psycopg hands an answer to its cursor whenever the answer
    arrives, and a fetch on a cursor that already holds one waits for no other:
    the rows of a statement run before the one read could be read in its place
    (seen: recall's candidates read as the rows of its planner settings, about
    once in 1,500 hybrid recalls at 100,000 memories).
    """
    curs.connection.execute(query, params)


@contextmanager
def read_transaction(datastore: PostgresDatastore) -> Iterator[Cursor[Any]]:
    """Yield a cursor in a transaction for reading tables without row-level security.

    It ends in ``COMMIT`` (nothing to write, so nothing to flush): on ``ROLLBACK``
    psycopg forgets every statement the connection prepared. Not made read-only,
    which would cost a statement: its callers only ``SELECT``.
    """
    with datastore.transaction(commit=True) as curs:
        yield curs


def known_tenants(datastore: PostgresDatastore) -> list[UUID]:
    """Return every tenant that has written (ids only: the one table without RLS)."""
    with read_transaction(datastore) as curs:
        curs.execute(
            schema_query("SELECT tenant_id FROM {schema}.revision_tenants", datastore.schema)
        )
        return [row["tenant_id"] for row in curs]
