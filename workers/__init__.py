"""Dramatiq drain workers for distributed deployments (``dramatiq palimpsest.workers.boot``).

Each actor wraps a drain of :mod:`palimpsest.projections.drains` or
:mod:`palimpsest.projections.recall`.

Modules:

- :mod:`palimpsest.workers.boot`: Entry point of distributed drain workers: ``dramatiq
  palimpsest.workers.boot``.
- :mod:`palimpsest.workers._cycles`: The ``decay_cycle`` dramatiq actor: the scheduled
  decay cycle, distributed.
- :mod:`palimpsest.workers._erasure`: The ``drain_erasure`` dramatiq actor: tenant
  deletions, a batch at a time.
- :mod:`palimpsest.workers._expiry`: The ``drain_raw_expiry`` dramatiq actor.
- :mod:`palimpsest.workers._forgetting`: The ``forgetting_pass`` dramatiq actor: the
  scheduled forgetting pass, distributed.
- :mod:`palimpsest.workers._hints`: Drain actors: a message is a hint, the work is found in
  the database.
- :mod:`palimpsest.workers._indexing`: The ``drain_index`` dramatiq actor: embed current
  versions for recall.
- :mod:`palimpsest.workers._revision`: The ``drain_revisions`` dramatiq actor.
"""

from __future__ import annotations

# ``boot`` is left out: importing it connects to the broker.
__all__ = []
