"""The event log's recorders: the library's recorder interface, for one tenant.

:class:`TenantScopedRecorder` implements ``insert_events`` and ``select_events``
(the interface ``eventsourcing`` calls, a subclass of its
``PostgresApplicationRecorder`` for everything else: notifications, the
datastore, its pool) with its own steps, named so that none overrides one of the
library's private hooks: the library's ``insert_events`` and the hooks it calls
(``_insert_events``, ``_insert_stored_events``, ``_lock_table``) never run
here, and its ``lock_table_statements`` are not read (the lock is taken in the
same mode: the contract test compares them).
``tests/projections/store/test_recorder_contract.py`` fails if an upgrade
changes the interface's signatures, drops an attribute read here, or adds a name
that one of this module's would shadow.

One insert transaction writes the events, then what must be atomic with them:
the payload rows they reference, token rows, the log's own marks
(:func:`~palimpsest.projections.store._log_sql.mark_for_revision`), the tables
of each feature's :class:`~palimpsest.projections.store.table_writers.TableWriter`,
the idempotency record of the request that caused them and, for a write that
archives memories by proposal or automatically, its reservation of the collapse
guard's allowance (:mod:`palimpsest.projections.store.archival_allowance`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from eventsourcing.persistence import (
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder
from psycopg import sql
from psycopg.rows import tuple_row

from palimpsest.projections.store._group_inserts import (
    REFUSALS,
    WRITE_ATTEMPTS,
    GroupInserts,
    pause_before_trying_again,
)
from palimpsest.projections.store._log_sql import (
    INSERT_PAYLOADS,
    INSERT_SNAPSHOTS,
    answered_positions,
    counted,
    insert_events_query,
    mark_for_revision,
    payload_columns,
    payloads_with_marks,
    queued_at,
    record_idempotency,
    select_events_query,
    stored_columns,
    table_query,
    write_tokens,
)
from palimpsest.projections.store._pipelined import (
    CommitUnknownError,
    pipelined_transaction,
    told_transaction,
)
from palimpsest.projections.store._unknown_commits import recorded_positions, transaction_ended
from palimpsest.projections.store._write import queueable_write
from palimpsest.projections.store.archival_allowance import reserve_archivals
from palimpsest.projections.store.arrays import UuidArray
from palimpsest.projections.store.errors import DatabaseUnavailableError, StaleReadError
from palimpsest.projections.store.ids import as_uuid
from palimpsest.projections.store.queued import Queued, QueuingCursor, UnqueueableError, send_queued
from palimpsest.projections.store.sql import Chain, schema_query
from palimpsest.projections.store.tenancy import current_tenant, set_tenant, tenant_transaction

if TYPE_CHECKING:
    from uuid import UUID

    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor, Pipeline

    from palimpsest.domain.dependency import Dependencies
    from palimpsest.projections.store._write import WriteContext
    from palimpsest.projections.store.table_writers import TableWriter

    _Compose = Callable[
        [Cursor[Any], Callable[[], Cursor[Any]], Pipeline | None],
        list[tuple[Cursor[Any], Sequence[StoredEvent]]],
    ]
    """What :meth:`TenantScopedRecorder._in_one_round_trip` runs: see there."""

_PIPELINE_MAX_EVENTS = 64
"""Largest insert sent in pipeline mode; 2,000 events stalled there every time."""


def _check_versions(curs: Cursor[Any], schema: str, write: WriteContext) -> None:
    """Refuse the transaction if an aggregate the write only read is no longer at the
    version it read (a citation must not commit after its observation was retracted
    or erased). Runs under the events-table lock, so no other write commits between
    this check and ours; the tables' writers check the rest
    (:meth:`~palimpsest.projections.store.table_writers.TableWriter.check`).

    Raises:
        StaleReadError: the write must be built again from fresh aggregates.
    """
    if not write.read_versions:
        return
    curs.execute(
        schema_query(
            "SELECT originator_id, max(originator_version) AS version"
            " FROM {schema}.{events} WHERE originator_id = ANY(%b::uuid[])"
            " GROUP BY originator_id",
            schema,
        ),
        (UuidArray(write.read_versions),),
    )
    changed = [
        originator_id
        for originator_id, version in curs.fetchall()
        if version != write.read_versions[originator_id]
    ]
    if changed:
        msg = f"aggregates changed since they were read: {sorted(map(str, changed))}"
        raise StaleReadError(msg)


class _TenantScopedReads:
    """``select_events`` for one aggregate's rows, as visible to the current tenant."""

    datastore: PostgresDatastore
    events_table_name: str

    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """Return one aggregate's events (or snapshots), as visible to the current tenant."""
        query = select_events_query(
            self.datastore.schema,
            self.events_table_name,
            gt=gt is not None,
            lte=lte is not None,
            desc=desc,
            limit=limit is not None,
        )
        params = [p for p in (originator_id, gt, lte, limit) if p is not None]
        with tenant_transaction(self.datastore, current_tenant(), commit=False) as curs:
            curs.execute(query, params)
            return [
                StoredEvent(
                    originator_id=row["originator_id"],
                    originator_version=row["originator_version"],
                    topic=row["topic"],
                    state=bytes(row["state"]),
                )
                for row in curs.fetchall()
            ]


class TenantScopedRecorder(GroupInserts, _TenantScopedReads, PostgresApplicationRecorder):
    """An application recorder that runs every statement for one tenant.

    Inserts require a ``write=WriteContext`` keyword (passed through
    ``Application.save``): without it there is no tenant, and the events
    table's ``tenant_id`` default is NULL, so the insert fails. Reads of an
    aggregate's events run in a transaction set to :func:`current_tenant`,
    so another tenant's aggregate is simply not found.
    """

    writers: tuple[TableWriter, ...] = ()
    """The tables kept in step with the log, written in each insert transaction (the
    event log sets them: :class:`~palimpsest.projections.store.eventlog.EventLog`)."""

    @cached_property
    def _writers_by_types(self) -> dict[tuple[type, ...], list[TableWriter]]:
        """The writers of each combination of row types met so far (few: a kind of
        write holds the same few types every time)."""
        return {}

    def _writers_of(self, found: Dependencies | None) -> list[TableWriter]:
        """Return the writers that read a row type ``found`` holds, in their order."""
        if found is None or not found.rows:
            return []
        types = tuple(found.rows)
        chosen = self._writers_by_types.get(types)
        if chosen is None:
            chosen = [w for w in self.writers if not w.reads.isdisjoint(types)]
            if len(self._writers_by_types) < 1024:
                self._writers_by_types[types] = chosen
        return chosen

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert events, and what must be atomic with them, in one transaction.

        The library runs these steps in psycopg pipeline mode, which saves
        round trips but stalls in ``sync()`` once a transaction is large
        (1,000 memories, 2,000 events, hung here every time). Small
        transactions keep the pipeline; large ones run as an ordinary
        transaction, where a few more round trips do not matter. A keyword
        ``sent`` is called once a pipelined transaction's one round trip is on its
        way (:meth:`_in_one_round_trip`).

        A lost or refused connection is tried again (:data:`WRITE_ATTEMPTS` tries in
        all), once the write is known not to have committed
        (:meth:`_settle`); a refusal of a try after the first whose events the log
        holds, byte for byte, is that earlier try's commit, answered with their
        positions (:meth:`_tried_again`).
        """
        write: WriteContext | None = kwargs.get("write")
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self._insert_once(stored_events, **kwargs)
            except (OperationalError, InterfaceError):
                # (An outcome left unknown is DatabaseUnavailableError, never this.)
                if attempt == WRITE_ATTEMPTS:
                    raise
            except REFUSALS as e:
                if attempt == 1:
                    raise
                (found,) = self._tried_again([(stored_events, write)], [e])
                if isinstance(found, Exception):
                    raise
                return found
            pause_before_trying_again()
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _insert_once(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        try:
            if 0 < len(stored_events) <= _PIPELINE_MAX_EVENTS:
                return self._insert_pipelined(stored_events, **kwargs)
            return self._insert_plain(stored_events, **kwargs)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            return self._settle(e.__cause__, [(stored_events, kwargs.get("write"))])[0]

    def _insert_plain(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The insert as an ordinary transaction, a round trip per statement.

        Raises:
            OperationalError: caused by :class:`CommitUnknownError` when the connection
                failed once ``COMMIT`` was sent.
        """
        with (
            self.datastore.get_connection() as conn,
            told_transaction(conn),
            conn.cursor(row_factory=tuple_row) as curs,
            conn.cursor(row_factory=tuple_row) as inserted,
        ):
            self._before_lock(curs, stored_events, **kwargs)
            if not stored_events:
                return []
            self._lock_and_insert(inserted, stored_events, **kwargs)
            self._after_insert(curs, inserted, stored_events, None, **kwargs)
            return self._ids(inserted, stored_events, None)

    def _insert_pipelined(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The library's insert, in one round trip when nothing waits for an answer.

        Every statement of the write (the tenant, large payloads, the lock, the
        insert and its position, the dependency rows and marks with small
        payloads) is queued, then ``COMMIT``, and the answers come back together
        (:meth:`_in_one_round_trip`).
        """

        def compose(
            curs: Cursor[Any], new_cursor: Callable[[], Cursor[Any]], pipeline: Pipeline | None
        ) -> list[tuple[Cursor[Any], Sequence[StoredEvent]]]:
            inserted = new_cursor()
            self._before_lock(curs, stored_events, **kwargs)
            self._lock_and_insert(inserted, stored_events, **kwargs)
            self._after_insert(curs, inserted, stored_events, pipeline, **kwargs)
            return [(inserted, stored_events)]

        (ids,) = self._in_one_round_trip(
            compose, queueable=queueable_write(kwargs.get("write")), sent=kwargs.get("sent")
        )
        return ids

    def _in_one_round_trip(
        self, compose: _Compose, *, queueable: bool, sent: Callable[[], None] | None = None
    ) -> list[list[int]]:
        """Run the transaction ``compose`` writes, sent in one round trip with its
        ``COMMIT``; return the positions of each insert it answers. ``sent`` is
        called once that round trip is on its way, if it is one (``queueable``).

        ``compose(curs, new_cursor, pipeline)`` executes the statements on ``curs``
        and each events insert on a cursor of its own from ``new_cursor()``, and
        returns those cursors with the events each inserts. If ``queueable``, it
        runs first on queuing cursors, and what it queued is sent by libpq
        directly (:mod:`palimpsest.projections.store.queued`). If it reads an answer within
        the transaction (a check of what the write read, an idempotency record's
        positions, the digests an erasure frees), or is not ``queueable`` (a
        caller that knows it will), it runs in psycopg's pipeline
        (:func:`palimpsest.projections.store._pipelined.pipelined_transaction`), where it
        waits for that answer, and an exception then rolls back.

        Either way the events table's lock is held only while PostgreSQL runs the
        statements, never across a round trip to this process (where a thread may
        wait for the interpreter), because the marks read the write's position in
        PostgreSQL (``{position}`` in :func:`palimpsest.projections.store.sql.schema_sql`). A
        refused statement (a version taken) makes PostgreSQL skip the rest,
        ``COMMIT`` included, and raises when the answers are read.
        """
        with self.datastore.get_connection() as conn:
            if queueable:
                queue: list[Queued] = []
                try:
                    inserts = compose(
                        QueuingCursor(conn, queue), lambda: QueuingCursor(conn, queue), None
                    )
                except UnqueueableError:
                    pass
                else:
                    results = send_queued(conn, queue, sent=sent)
                    return [
                        counted(answered_positions(results[queued_at(c)]), stored)
                        for c, stored in inserts
                    ]
            with conn.cursor(row_factory=tuple_row) as curs:
                cursors: list[Cursor[Any]] = []

                def new_cursor() -> Cursor[Any]:
                    cursors.append(conn.cursor(row_factory=tuple_row))
                    return cursors[-1]

                try:
                    with pipelined_transaction(conn) as pipeline:
                        inserts = compose(curs, new_cursor, pipeline)
                    return [self._ids(c, stored, None) for c, stored in inserts]
                finally:
                    for c in cursors:
                        c.close()

    @cached_property
    def _tenant_timeout_and_notify(self) -> bytes:
        """The statement of :meth:`_set_tenant_and_notify`."""
        timeout = f"{self.datastore.lock_timeout}s"
        return (
            sql.SQL(
                "SELECT set_config('palimpsest.tenant_id', %s, true),"
                " set_config('lock_timeout', {timeout}, true), pg_notify({channel}, '')"
            )
            .format(timeout=sql.Literal(timeout), channel=sql.Literal(self.channel_name))
            .as_bytes(None)
        )

    def _set_tenant_and_notify(self, curs: Cursor[Any], tenant_id: UUID | None) -> None:
        """Set the tenant whose rows follow (none: no rows), the events table lock's
        timeout (``SET LOCAL lock_timeout``, as the library sets it) and ``NOTIFY``
        its channel (delivered at commit: the elected drains listen), in one
        statement: a statement cost a write 33 microseconds of this process's time
        in its pipeline, however little it does."""
        tenant = "" if tenant_id is None else str(tenant_id)
        curs.execute(self._tenant_timeout_and_notify, (tenant,), prepare=True)

    def _lock(self, curs: Cursor[Any]) -> None:
        """Take the events table's lock as the library does (after
        :meth:`_set_tenant_and_notify` in the same transaction, for its timeout)."""
        curs.execute(self._lock_statement, prepare=True)

    @cached_property
    def _lock_statement(self) -> bytes:
        """``LOCK TABLE`` of the events table, in the mode the library takes it."""
        return (
            sql.SQL("LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE")
            .format(
                schema=sql.Identifier(self.datastore.schema),
                table=sql.Identifier(self.events_table_name),
            )
            .as_bytes(None)
        )

    def _lock_and_insert(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        """Lock and insert as the library does, but with four plain arrays (after
        :meth:`_before_lock`, which set the lock's timeout and the ``NOTIFY``).

        The library passes one array of a composite type, which psycopg dumps
        element by element in Python; columns of uuid, bigint, text and bytea
        go out as plain arrays in binary format (``%b``), which skips the
        per-element escaping that was the largest single cost of a batch.
        """
        self._lock(curs)
        curs.execute(
            insert_events_query(self.datastore.schema, self.events_table_name),
            stored_columns(stored_events),
        )

    def _before_lock(
        self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        """Queue what the write sends before the events table's lock: the tenant, the
        lock's timeout and the ``NOTIFY``; its archivals' reservation, large payloads
        and token rows."""
        write: WriteContext | None = kwargs.get("write")
        self._set_tenant_and_notify(curs, write.tenant_id if write else None)
        if write is None:
            return
        # One statement per table, whatever the batch size: psycopg's pipeline
        # mode can stall on sync() with thousands of queued statements.
        schema = self.datastore.schema
        if write.archivals is not None:
            # Before the events table's lock: writes that archive wait for each
            # other on the allowance's row, not while every writer waits for them.
            reserve_archivals(curs, schema, write.archivals)
        if write.payloads and not payloads_with_marks(write, stored_events):
            curs.execute(schema_query(INSERT_PAYLOADS, schema), payload_columns(write.payloads))
        write_tokens(curs, schema, write)

    def _after_insert(
        self,
        curs: Cursor[Any],
        inserted: Cursor[Any],
        stored_events: Sequence[StoredEvent],
        pipeline: Pipeline | None,
        **kwargs: Any,
    ) -> None:
        """Queue what the write records beside its events, after the insert on
        ``inserted``: its position (for ``{position}``), its dependency rows and
        marks; then check what it read and record its idempotency responses, the
        only steps that wait for answers (and only when the write has them)."""
        write: WriteContext | None = kwargs.get("write")
        if write is None:
            return
        schema = self.datastore.schema
        found = write.dependencies
        writers = self._writers_of(found)
        if found is not None:
            chain = Chain()
            payloads = write.payloads if payloads_with_marks(write, stored_events) else {}
            mark_for_revision(chain, schema, found, payloads)
            for writer in writers:
                writer.chain(chain, schema, found)
            # What follows may read what the chain writes (payloads still held, rows
            # to update).
            chain.execute(curs)
            for writer in writers:
                writer.write(curs, schema, found)
        _check_versions(curs, schema, write)
        if found is not None:
            for writer in writers:
                writer.check(curs, schema, found, write.loaded)
        keyed = [w for w in write.members or [write] if w.idempotency is not None]
        if not keyed:
            return
        ids = self._ids(inserted, stored_events, pipeline)
        positions = {
            (as_uuid(e.originator_id), e.originator_version): n
            for e, n in zip(stored_events, ids, strict=True)
        }
        for each in keyed:
            record_idempotency(curs, schema, each, positions)

    def _ids(
        self, inserted: Cursor[Any], stored_events: Sequence[StoredEvent], pipeline: Pipeline | None
    ) -> list[int]:
        """Return the positions the insert on ``inserted`` gave ``stored_events`` (in
        pipeline mode, waiting for its answer if it has not come yet).

        Raises:
            ProgrammingError: the insert answered fewer positions than events.
        """
        if pipeline is not None and inserted.pgresult is None:
            pipeline.sync()  # sends what is queued, and reads every answer so far
        if inserted.rownumber:
            inserted.scroll(0, mode="absolute")  # read before (for an idempotency record)
        return counted([int(position) for position, _ in inserted.fetchall()], stored_events)

    def _tried_again(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
        results: Sequence[Sequence[int] | Exception],
    ) -> list[Sequence[int] | Exception]:
        """Return ``results`` (of writes tried again after a lost connection), each
        refusal replaced by its write's positions if the log holds its events, byte
        for byte: an earlier try committed them, and the refusal is that commit's
        unique key, not another writer's win (which would build the write again, with
        new ids, and record it twice). Nothing needs waiting for: the row a unique
        key refuses is committed.

        Raises:
            DatabaseUnavailableError: the log could not be read: the outcome is unknown.
        """
        refused = [i for i, r in enumerate(results) if isinstance(r, REFUSALS)]
        if not refused:
            return list(results)
        settled = list(results)
        try:
            for i in refused:
                stored, write = members[i]
                found = recorded_positions(
                    self.datastore,
                    self.events_table_name,
                    write.tenant_id if write else None,
                    stored,
                )
                if found is not None:
                    settled[i] = found
        except PersistenceError as e:
            msg = f"a write tried again was refused, and the log could not be read: {e}"
            raise DatabaseUnavailableError(msg) from e
        return settled

    def _settle(
        self,
        error: CommitUnknownError,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
    ) -> list[Sequence[int]]:
        """Return the positions of ``members``' events (the writes of one transaction
        whose connection failed after its ``COMMIT`` was sent) once that transaction
        is over, if it committed (:mod:`palimpsest.projections.store._unknown_commits`).

        Raises:
            OperationalError: it did not commit (trying again is safe).
            DatabaseUnavailableError: it was not over in time, or the database could not
                be asked: nothing is tried again, and the caller learns that the
                outcome is unknown.
        """
        datastore = self.datastore
        unknown = f"a write's outcome is unknown: {error}"
        try:
            # Not retried by this method's caller if it fails: only a write known not
            # to have committed is tried again.
            if not transaction_ended(datastore, error.backend_pid, datastore.lock_timeout + 10.0):
                raise DatabaseUnavailableError(unknown) from error
            table = self.events_table_name
            found = [
                recorded_positions(datastore, table, write.tenant_id if write else None, stored)
                for stored, write in members
            ]
        except PersistenceError as e:
            raise DatabaseUnavailableError(unknown) from e
        if any(positions is None for positions in found):
            msg = f"a write did not commit before its connection failed: {error}"
            raise OperationalError(msg) from error
        return [positions for positions in found if positions is not None]


class TenantScopedSnapshotRecorder(_TenantScopedReads, PostgresAggregateRecorder):
    """The snapshot store's recorder: rows are written and read for the current tenant."""

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """Insert snapshots for the tenant of the enclosing scope; an existing
        snapshot of the same version is left as it is (it holds the same state)."""
        if not stored_events:
            return None
        with self.datastore.transaction(commit=True) as curs:
            set_tenant(curs, current_tenant())
            curs.execute(
                table_query(INSERT_SNAPSHOTS, self.datastore.schema, self.events_table_name),
                stored_columns(stored_events),
            )
        return None
