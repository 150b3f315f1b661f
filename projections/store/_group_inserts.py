"""Several writes inserted in one transaction: the group commit's insert.

:class:`GroupInserts` is the part of the tenant-scoped recorder
(:class:`~palimpsest.projections.store._recorder.TenantScopedRecorder`) that inserts a
group commit's writes: first as one write per tenant in one round trip, then, if
the database refuses that, one savepoint per write so that the refused one alone
fails. It uses the recorder's own steps (the settings and lock, the insert, what is
recorded beside it, the settlement of an unknown outcome), declared below for the
type checker.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    StoredEvent,
)
from psycopg.rows import tuple_row

from palimpsest.domain.errors import CollapseGuardError
from palimpsest.projections.store._log_sql import insert_events_query, stored_columns
from palimpsest.projections.store._pipelined import CommitUnknownError, told_transaction
from palimpsest.projections.store._write import UnmergeableError, merged, queueable_write
from palimpsest.projections.store.errors import StaleReadError

if TYPE_CHECKING:
    from uuid import UUID

    from eventsourcing.postgres import PostgresDatastore
    from psycopg import Cursor, Pipeline

    from palimpsest.projections.store._write import WriteContext

WRITE_ATTEMPTS = 3
"""Tries of one insert transaction that met a lost or refused connection. Each
waits at most ``PALIMPSEST_DB_WAIT_S`` for a connection, so an outage answers a
write within about three times that (it was ten tries of ten seconds)."""

_RETRY_WAIT_S = 0.5
"""The pause before a write is tried again (give or take a tenth, as the library's)."""

REFUSALS = (IntegrityError, StaleReadError, CollapseGuardError)
"""What refuses a write that, tried again, may be refusing its own earlier commit:
its events' or its idempotency record's unique key, its read check (it changed what
it read), the allowance it took itself."""


def pause_before_trying_again() -> None:
    """Wait before a write is tried again, jittered: writes failed together (an outage)
    do not all try again at the same moment."""
    time.sleep(_RETRY_WAIT_S * random.uniform(0.95, 1.05))


class GroupInserts:
    """The group commit's insert, mixed into the tenant-scoped recorder."""

    isolated_groups = 0
    """Groups inserted one savepoint per write after the database refused them as one."""

    if TYPE_CHECKING:  # the recorder's own, which this part uses
        datastore: PostgresDatastore
        events_table_name: str

        def _in_one_round_trip(
            self,
            compose: Callable[
                [Cursor[Any], Callable[[], Cursor[Any]], Pipeline | None],
                list[tuple[Cursor[Any], Sequence[StoredEvent]]],
            ],
            *,
            queueable: bool,
            sent: Callable[[], None] | None = None,
        ) -> list[list[int]]: ...

        def _set_tenant_and_notify(self, curs: Cursor[Any], tenant_id: UUID | None) -> None: ...

        def _lock(self, curs: Cursor[Any]) -> None: ...

        def _before_lock(
            self, curs: Cursor[Any], stored_events: Sequence[StoredEvent], **kwargs: Any
        ) -> None: ...

        def _after_insert(
            self,
            curs: Cursor[Any],
            inserted: Cursor[Any],
            stored_events: Sequence[StoredEvent],
            pipeline: Pipeline | None,
            **kwargs: Any,
        ) -> None: ...

        def _ids(
            self,
            inserted: Cursor[Any],
            stored_events: Sequence[StoredEvent],
            pipeline: Pipeline | None,
        ) -> list[int]: ...

        def _tried_again(
            self,
            members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
            results: Sequence[Sequence[int] | Exception],
        ) -> list[Sequence[int] | Exception]: ...

        def _settle(
            self,
            error: CommitUnknownError,
            members: Sequence[tuple[Sequence[StoredEvent], WriteContext | None]],
        ) -> list[Sequence[int]]: ...

    def insert_group(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None = None,
    ) -> list[Sequence[int] | Exception]:
        """Insert several writes in one transaction: one lock, one commit, one fsync.

        First as one write per tenant (their rows in one statement per table, as a
        batch is written), in the order the writes came. If the database refuses
        that (one write's version was taken, its ``Idempotency-Key`` used at once
        by another request, a stale read), the transaction rolls back and the
        writes are inserted again one savepoint each (:meth:`_insert_isolated`),
        so the refused one alone fails. A lost connection, or a failed commit,
        fails the whole group, which is tried again once it is known not to have
        committed, as a write alone is (:meth:`insert_events`). ``sent`` is called
        once the group's one round trip is on its way (:meth:`_in_one_round_trip`).

        Returns:
            Per member, in order: its log positions, or the exception that refused it.
        """
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                results = self._insert_group_once(members, sent)
            except (OperationalError, InterfaceError):
                if attempt == WRITE_ATTEMPTS:
                    raise
                pause_before_trying_again()
                continue
            return results if attempt == 1 else self._tried_again(members, results)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _insert_group_once(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None,
    ) -> list[Sequence[int] | Exception]:
        try:
            return self._insert_merged(members, sent)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            return list(self._settle(e.__cause__, members))
        except InterfaceError:
            raise
        except (DatabaseError, StaleReadError, UnmergeableError):
            self.isolated_groups += 1
            return self._insert_isolated(members)

    def _insert_merged(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        sent: Callable[[], None] | None,
    ) -> list[Sequence[int] | Exception]:
        by_tenant: dict[UUID, list[int]] = {}
        for index, (_, write) in enumerate(members):
            by_tenant.setdefault(write.tenant_id, []).append(index)

        def compose(
            curs: Cursor[Any], new_cursor: Callable[[], Cursor[Any]], pipeline: Pipeline | None
        ) -> list[tuple[Cursor[Any], Sequence[StoredEvent]]]:
            inserts: list[tuple[Cursor[Any], Sequence[StoredEvent]]] = []
            for indexes in by_tenant.values():
                write = merged([members[i][1] for i in indexes])
                stored = [event for i in indexes for event in members[i][0]]
                self._before_lock(curs, stored, write=write)
                if not inserts:  # after the first tenant's settings: the lock's timeout
                    self._lock(curs)
                inserted = new_cursor()
                inserted.execute(
                    insert_events_query(self.datastore.schema, self.events_table_name),
                    stored_columns(stored),
                )
                self._after_insert(curs, inserted, stored, pipeline, write=write)
                inserts.append((inserted, stored))
            return inserts

        # One round trip for the whole group, as for one write; every refusal raises
        # when the answers are read, and nothing commits.
        results: list[Sequence[int] | Exception] = [[] for _ in members]
        queueable = all(queueable_write(write) for _, write in members)
        inserted = self._in_one_round_trip(compose, queueable=queueable, sent=sent)
        for indexes, ids in zip(by_tenant.values(), inserted, strict=True):
            rest = ids
            for i in indexes:
                count = len(members[i][0])
                results[i], rest = rest[:count], rest[count:]
        return results

    def _insert_isolated(
        self, members: Sequence[tuple[Sequence[StoredEvent], WriteContext]]
    ) -> list[Sequence[int] | Exception]:
        """Insert the writes in one transaction, each in its own savepoint; if the
        connection failed once its ``COMMIT`` was sent, settle what it would have
        committed (the writes not refused) as :meth:`_settle` does."""
        results: list[Sequence[int] | Exception] = []
        try:
            self._insert_each(members, results)
        except OperationalError as e:
            if not isinstance(e.__cause__, CommitUnknownError):
                raise
            written = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
            positions = self._settle(e.__cause__, [members[i] for i in written])
            for i, found in zip(written, positions, strict=True):
                results[i] = found
        return results

    def _insert_each(
        self,
        members: Sequence[tuple[Sequence[StoredEvent], WriteContext]],
        results: list[Sequence[int] | Exception],
    ) -> None:
        """Append to ``results`` each write's positions, or its refusal, as its savepoint
        ends; commit them all.

        Raises:
            OperationalError: caused by :class:`CommitUnknownError` when the connection
                failed once ``COMMIT`` was sent.
        """
        with (
            self.datastore.get_connection() as conn,
            conn.pipeline() as pipeline,  # round trips only where a result is needed
            told_transaction(conn),
            conn.cursor(row_factory=tuple_row) as curs,
        ):
            self._set_tenant_and_notify(curs, None)  # each write sets its own, below
            self._lock(curs)
            for stored, write in members:
                try:
                    with (
                        conn.transaction(),  # a savepoint
                        conn.cursor(row_factory=tuple_row) as inserted,
                    ):
                        self._before_lock(curs, stored, write=write)
                        inserted.execute(
                            insert_events_query(self.datastore.schema, self.events_table_name),
                            stored_columns(stored),
                        )
                        self._after_insert(curs, inserted, stored, pipeline, write=write)
                        pipeline.sync()  # a refused statement raises here, in its savepoint
                        ids = self._ids(inserted, stored, pipeline)
                except (psycopg.OperationalError, psycopg.InterfaceError):
                    raise
                except psycopg.Error as e:
                    results.append(_refusal(e))
                except StaleReadError as e:
                    results.append(e)
                else:
                    results.append(ids)


def _refusal(error: psycopg.Error) -> Exception:
    """Return the event store's exception for a database refusal of one write (as
    ``PostgresDatastore.get_connection`` translates it for a write alone)."""
    if isinstance(error, psycopg.IntegrityError):
        return IntegrityError(str(error))
    if isinstance(error, psycopg.DataError):
        return DataError(str(error))
    return DatabaseError(str(error))
