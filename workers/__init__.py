"""Dramatiq drain workers for distributed deployments (``dramatiq workers.boot``).

Each actor wraps a drain of :mod:`projections.drains` or :mod:`projections.recall`.

Modules:

- :mod:`workers.boot`: Entry point of distributed drain workers: ``dramatiq
  workers.boot``.
- :mod:`workers.cycles`: The ``decay_cycle`` dramatiq actor: the scheduled
  decay cycle, distributed.
- :mod:`workers.erasure`: The ``drain_erasure`` dramatiq actor: tenant
  deletions, a batch at a time.
- :mod:`workers.expiry`: The ``drain_raw_expiry`` dramatiq actor.
- :mod:`workers.forgetting`: The ``forgetting_pass`` dramatiq actor: the
  scheduled forgetting pass, distributed.
- :mod:`workers.hints`: Drain actors: a message is a hint, the work is found in
  the database.
- :mod:`workers.indexing`: The ``drain_index`` dramatiq actor: embed current
  versions for recall.
- :mod:`workers.revision`: The ``drain_revisions`` dramatiq actor.
"""

from __future__ import annotations

# ``boot`` is left out: importing it connects to the broker.
__all__ = [
    "cycles",
    "erasure",
    "expiry",
    "forgetting",
    "hints",
    "indexing",
    "revision",
]
