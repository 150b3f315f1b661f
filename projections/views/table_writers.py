"""The read models the views room keeps in step with the log, written in each write's
transaction: the memory and decision indexes, removals (deadlines, held content,
retention, tenant deletion, the sweeps' due marks), proposals, decay cycles and
reflections.

:data:`VIEW_WRITERS` is the list every event log is made with (through
``palimpsest.projections.runtime.table_writers()``, which adds recall's), and the
one rebuild and verify replay (:mod:`palimpsest.projections.views.read_models`).
A new read model kept by the write path is a writer here: rows and rules in a
domain module, the SQL and its replay in a :class:`TableWriter` subclass.
"""

from __future__ import annotations

from palimpsest.projections.store.table_writers import TableWriter
from palimpsest.projections.views._cycle_writer import CycleWriter
from palimpsest.projections.views._index_writer import IndexWriter
from palimpsest.projections.views._proposal_writer import ProposalWriter
from palimpsest.projections.views._reflection_writer import ReflectionWriter
from palimpsest.projections.views._removal_writer import RemovalWriter

__all__ = ["VIEW_WRITERS"]

VIEW_WRITERS: tuple[TableWriter, ...] = (
    IndexWriter(),
    RemovalWriter(),
    ProposalWriter(),
    CycleWriter(),
    ReflectionWriter(),
)
"""The views room's writers, in the order a write runs them."""
