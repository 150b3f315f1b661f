"""Tables a feature keeps in step with the log, written in each write's transaction.

The recorder writes a write's events, its payloads and the log's own bookkeeping
(revision marks, links, citations, support). Every other table that must change
atomically with the log (the memory index, observations' deadlines, proposals,
cycles, reflections, recall's indexes of erased content) is written by a
:class:`TableWriter` of the room that owns the table, handed to the event log
when it is made (``EventLog(env, writers=...)``; ``projections/runtime.py``
gives the standard list). The store knows none of them by name.

A writer declares the domain rules (:class:`~palimpsest.domain.dependency.Rule`) that
make its rows from events and the row types it reads; the recorder calls it only
for a write that holds such rows, in three steps of the write's transaction,
after the events' insert and under the events table's lock:

1. :meth:`TableWriter.chain`: inserts that read nothing another statement of the
   write writes, queued on the write's one chained statement
   (:class:`~palimpsest.projections.store.sql.Chain`);
2. :meth:`TableWriter.write`: statements that may read what the chain wrote;
3. :meth:`TableWriter.check`: refusals of a write built from what has changed
   since (``StaleReadError``), after the recorder's own check of the versions
   the write read.

:meth:`TableWriter.replay` does in Python what the first two steps do in SQL, for
rebuild and verify (:mod:`palimpsest.projections.views.read_models`): verify then
checks two implementations against each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.projections.store.storable import storable

if TYPE_CHECKING:
    from psycopg import Cursor

    from palimpsest.domain.dependency import Dependencies, Row, Rule
    from palimpsest.projections.store.sql import Chain

__all__ = ["ReadModelRows", "TableWriter", "storable_rows"]

ReadModelRows = dict[str, dict[tuple[Any, ...], tuple[Any, ...]]]
"""Read-model rows computed in memory: by table name, each row's value columns by
its key columns."""


class TableWriter:
    """A feature's tables, written in the transaction of every write that holds rows
    of a type in :attr:`reads`. Every step does nothing unless overridden, and never
    commits."""

    rules: tuple[Rule, ...] = ()
    """The rules that make the rows this writer reads (shared rules count once)."""
    reads: frozenset[type[Row]] = frozenset()
    """The row types that make the recorder call this writer."""

    def chain(self, chain: Chain, schema: str, found: Dependencies) -> None:
        """Queue, on the write's chained statement, inserts that neither read what
        another statement of the write writes nor write the same rows."""

    def write(self, curs: Cursor[Any], schema: str, found: Dependencies) -> None:
        """Run the statements that may read what the chain wrote."""

    def check(
        self, curs: Cursor[Any], schema: str, found: Dependencies, loaded: frozenset[UUID]
    ) -> None:
        """Refuse the write if what it was built from has changed since.

        ``loaded`` is every aggregate the write read or changed.

        Raises:
            StaleReadError: the write must be built again from fresh aggregates.
        """

    def replay(self, rows: ReadModelRows, found: Dependencies, position: int) -> None:
        """Apply to ``rows`` what :meth:`chain` and :meth:`write` do to the tables, for
        a write whose last log position is ``position``."""


def storable_rows(found: Dependencies) -> Dependencies:
    """Return ``found`` with every row's text made storable
    (:func:`~palimpsest.projections.store.storable.storable`), in place: what the
    write path and rebuild hand the writers. List by list, as nearly no write has
    anything to replace (``touched`` holds ids only)."""
    for kind, rows in found.rows.items():
        clean = storable(rows)
        if clean is not rows:
            found.rows[kind] = clean
    return found
