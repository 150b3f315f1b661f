"""The read and write paths over the event log, one room a concern.

Which room may import which is drawn in ``docs/architecture.md`` and enforced
by ``tests/test_architecture.py``: ``store`` sits at the bottom, ``commands``
and ``views`` are siblings that never import each other, ``recall``,
``drains`` and ``history`` sit above them, and :mod:`palimpsest.projections.runtime`
ties one process's connections together.

Modules:

- :mod:`palimpsest.projections.commands`: commands
- :mod:`palimpsest.projections.drains`: drains
- :mod:`palimpsest.projections.history`: history
- :mod:`palimpsest.projections.judgment`: judgment
- :mod:`palimpsest.projections.recall`: recall
- :mod:`palimpsest.projections.runtime`: One process's connection to palimpsest's database
  and event log.
- :mod:`palimpsest.projections.store`: store
- :mod:`palimpsest.projections.views`: views
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
