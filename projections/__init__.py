"""Everything between the HTTP edge and the domain: the event log, the writes that
append to it, the read models kept from it, and the background work that keeps
them caught up.

Which room may import which is drawn in ``docs/architecture.md`` and enforced by
``tests/test_architecture.py``: the store sits at the bottom, the write side and
the read side are siblings that never import each other, recall and judgment sit
on them, the drains and history on those, and the runtime wires one process.

Modules:

- :mod:`palimpsest.projections.commands`: The write side: who is asking, what their
  role lets them write, and the one path that checks it and records the events.
- :mod:`palimpsest.projections.drains`: Background work found in the database (a
  message is only a hint): publishing beliefs, expiry, retention, tenant erasure,
  the forgetting pass and the decay cycle.
- :mod:`palimpsest.projections.history`: The log as a whole: replay it to a point,
  rebuild every read model from it, verify the read models against it.
- :mod:`palimpsest.projections.judgment`: Asking a language model: the forgetting
  pass's judge, consolidation's summariser, the decay cycle's importance scorer.
- :mod:`palimpsest.projections.recall`: Finding memories by meaning and by words:
  embedders, the indexing drain, search, and the candidates other work starts from.
- :mod:`palimpsest.projections.runtime`: One process wired together: its database,
  its event log with the tables kept in step with it, and its embedder.
- :mod:`palimpsest.projections.store`: The database and the event log: where the
  database is, its tables and migrations, and the transaction that records a write.
- :mod:`palimpsest.projections.views`: The read side: typed answers from the read
  models and the log, and the read models each write keeps in step.
"""

from __future__ import annotations

__all__ = [
    "commands",
    "drains",
    "history",
    "judgment",
    "recall",
    "runtime",
    "store",
    "views",
]
