"""Background drains that catch projections up with the log, in process or on
dramatiq workers; a message is only ever a hint.

Modules:

- :mod:`projections.drains.expiry`: Raw expiry: delete observation bytes at
  their retention deadline.
- :mod:`projections.drains.hints`: The dramatiq broker that carries wake-up
  hints, shared by senders and workers.
- :mod:`projections.drains.loop`: The in-process drain loop that embedded
  ``serve`` runs beside the HTTP server.
- :mod:`projections.drains.retention`: The retention drain: apply a tenant's
  shorter retention to deadlines already set.
- :mod:`projections.drains.revision`: The revision drain: recompute dirty
  memories and publish their beliefs.
- :mod:`projections.drains.settings`: Settings of the drain workers.
- :mod:`projections.drains.tenant_erasure`: The tenant erasure drain: erase a
  deleted tenant in bounded batches, then complete it.
"""

from __future__ import annotations

__all__ = [
    "expiry",
    "hints",
    "loop",
    "retention",
    "revision",
    "settings",
    "tenant_erasure",
]
