"""The HTTP routers, one per resource; each takes its caller and runtime as
dependencies from :mod:`api.deps`.

Modules:

- :mod:`api.routers.admin`: ``/v1/admin``: the service's resident state, for
  the tenant's administrators.
- :mod:`api.routers.batch`: ``/v1/batch``: many writes in one transaction.
- :mod:`api.routers.contributions`: ``/v1/memories/{id}/contributions``: add
  support to a version without rewriting it.
- :mod:`api.routers.cycles`: ``/v1/cycles``: the decay cycle, run on demand and
  read back.
- :mod:`api.routers.decisions`: ``/v1/decisions``: explain one recorded
  decision.
- :mod:`api.routers.edges`: ``/v1/memories/{id}/edges/{edge_id}``: retract an
  edge, by a recorded decision.
- :mod:`api.routers.erasures`: ``/v1/erasures``: erase content and its lineage,
  and read the receipts.
- :mod:`api.routers.events`: ``/v1/events``: the tenant's event feed, paged or
  as a Server-Sent Events stream.
- :mod:`api.routers.forgetting`: ``/v1/forgetting``: a person as the forgetting
  pass's judge.
- :mod:`api.routers.health`: ``/healthz`` and ``/metrics``: for operators and
  their monitoring.
- :mod:`api.routers.memories`: ``/v1/memories``: create memories, record
  versions and edges, read versions.
- :mod:`api.routers.observations`: ``/v1/observations``: capture raw reports
  and read them back.
- :mod:`api.routers.proposals`: ``/v1/proposals``: review the forgetting
  pass's proposals, and apply or reject them.
- :mod:`api.routers.proposers`: ``/v1/proposers``: withdraw the support a
  proposer or a model contributed.
- :mod:`api.routers.recall`: ``/v1/recall``: find memories by meaning.
- :mod:`api.routers.review`: ``/review``: the page where a person reviews the
  forgetting pass's proposals (HTML, outside the JSON API).
- :mod:`api.routers.revision`: ``/v1/revision``: how far revision has caught
  up, for the caller's tenant.
- :mod:`api.routers.tenant`: ``/v1/tenant``: the caller's tenant as a whole.
"""

from __future__ import annotations

__all__ = [
    "admin",
    "batch",
    "contributions",
    "cycles",
    "decisions",
    "edges",
    "erasures",
    "events",
    "forgetting",
    "health",
    "memories",
    "observations",
    "proposals",
    "proposers",
    "recall",
    "review",
    "revision",
    "tenant",
]
