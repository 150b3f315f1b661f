"""The HTTP routers, one per resource; each takes its caller and runtime as
dependencies from :mod:`palimpsest.api._deps`.

Modules:

- :mod:`palimpsest.api.routers._admin`: ``/v1/admin``: the service's resident state, for
  the tenant's administrators.
- :mod:`palimpsest.api.routers._batch`: ``/v1/batch``: many writes in one transaction.
- :mod:`palimpsest.api.routers._contributions`: ``/v1/memories/{id}/contributions``: add
  support to a version without rewriting it.
- :mod:`palimpsest.api.routers._cycles`: ``/v1/cycles``: the decay cycle, run on demand and
  read back.
- :mod:`palimpsest.api.routers._decisions`: ``/v1/decisions``: explain one recorded
  decision.
- :mod:`palimpsest.api.routers._edges`: ``/v1/memories/{id}/edges/{edge_id}``: retract an
  edge, by a recorded decision.
- :mod:`palimpsest.api.routers._erasures`: ``/v1/erasures``: erase content and its lineage,
  and read the receipts.
- :mod:`palimpsest.api.routers._events`: ``/v1/events``: the tenant's event feed, paged or
  as a Server-Sent Events stream.
- :mod:`palimpsest.api.routers._forgetting`: ``/v1/forgetting``: a person as the forgetting
  pass's judge.
- :mod:`palimpsest.api.routers._health`: ``/healthz`` and ``/metrics``: for operators and
  their monitoring.
- :mod:`palimpsest.api.routers._landing`: ``/``: the service's name, version and entrances,
  for whoever found it.
- :mod:`palimpsest.api.routers._memories`: ``/v1/memories``: create memories, record
  versions and edges, read versions.
- :mod:`palimpsest.api.routers._observations`: ``/v1/observations``: capture raw reports
  and read them back.
- :mod:`palimpsest.api.routers._proposals`: ``/v1/proposals``: review the forgetting
  pass's proposals, and apply or reject them.
- :mod:`palimpsest.api.routers._proposers`: ``/v1/proposers``: withdraw the support a
  proposer or a model contributed.
- :mod:`palimpsest.api.routers._recall`: ``/v1/recall``: find memories by meaning.
- :mod:`palimpsest.api.routers._review`: ``/review``: the page where a person reviews the
  forgetting pass's proposals (HTML, outside the JSON API).
- :mod:`palimpsest.api.routers._revision`: ``/v1/revision``: how far revision has caught
  up, for the caller's tenant.
- :mod:`palimpsest.api.routers._tenant`: ``/v1/tenant``: the caller's tenant as a whole.
"""

from __future__ import annotations

__all__ = []
