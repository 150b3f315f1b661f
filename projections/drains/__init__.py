"""Background drains that catch projections up with the log, in process or on
dramatiq workers; a message is only ever a hint.

Modules:

- :mod:`palimpsest.projections.drains._consolidation`: Consolidation of a decay cycle's
  survivors (seed 004): merge, then reflect.
- :mod:`palimpsest.projections.drains.counters`: Process-wide counts of what went wrong in
  the background, for ``/metrics``.
- :mod:`palimpsest.projections.drains.decay_cycle`: The decay cycle for one tenant: score,
  bucket, fade, prune, then consolidate.
- :mod:`palimpsest.projections.drains._decay_scoring`: Scoring a tenant's memories for the
  decay cycle, bucketing them, and planning the prunes.
- :mod:`palimpsest.projections.drains._expiry`: Raw expiry: delete observation bytes at
  their retention deadline.
- :mod:`palimpsest.projections.drains.forgetting_pass`: The forgetting pass for one tenant:
  candidates, a judge, proposals (seed 000).
- :mod:`palimpsest.projections.drains.heartbeat`: The drains' heartbeats: each dramatiq
  drain records in the database when it last completed a pass, so a process that runs
  no drain (``serve`` with ``BROKER_URL``) can tell a worker pool that died from one
  that is merely idle.
- :mod:`palimpsest.projections.drains.hints`: The dramatiq broker that carries wake-up
  hints, shared by senders and workers.
- :mod:`palimpsest.projections.drains.isolation`: Drain work one stage and one tenant at a
  time: a failure stays where it happened.
- :mod:`palimpsest.projections.drains.judge_budget`: The forgetting pass's daily budget of
  judge calls and tokens, per tenant.
- :mod:`palimpsest.projections.drains.loop`: The in-process drain loop that embedded
  ``serve`` runs beside the HTTP server.
- :mod:`palimpsest.projections.drains._reflections`: Consolidation's second pass:
  reflections over a cycle's survivors (seed 004).
- :mod:`palimpsest.projections.drains._retention`: The retention drain: apply a tenant's
  shorter retention to deadlines already set.
- :mod:`palimpsest.projections.drains.revision`: The revision drain: recompute dirty
  memories and publish their beliefs.
- :mod:`palimpsest.projections.drains.settings`: Settings of the drain workers.
- :mod:`palimpsest.projections.drains.stages`: The stages of a drain pass, each over the
  tenants that have its work due.
- :mod:`palimpsest.projections.drains._tenant_erasure`: The tenant erasure drain: erase a
  deleted tenant in bounded batches, then complete it.
"""

from __future__ import annotations

__all__ = [
    "counters",
    "decay_cycle",
    "forgetting_pass",
    "heartbeat",
    "hints",
    "isolation",
    "judge_budget",
    "loop",
    "revision",
    "settings",
    "stages",
]
