"""Writes: who is asking, what they ask for, and the one path that checks their
role and records the events. Imports :mod:`palimpsest.projections.store` and
:mod:`domain`, never :mod:`palimpsest.projections.views`.

Modules:

- :mod:`palimpsest.projections.commands.caller`: The caller of a command: an authenticated
  principal, its tenant and its role.
- :mod:`palimpsest.projections.commands._capture`: Capturing observations: raw reports,
  their bytes stored apart from their event.
- :mod:`palimpsest.projections.commands.collapse_guard`: The collapse guard: how many
  memories a tenant's day may see archived without a person forgetting each one.
- :mod:`palimpsest.projections.commands.consolidation`: Consolidation's writes: proposing a
  merge, and folding memories into one.
- :mod:`palimpsest.projections.commands.contributions`: Adding support: contributions to
  an existing version, without writing its text again.
- :mod:`palimpsest.projections.commands.cycle`: Recording a decay cycle: its fades, its
  prunes, and its report, in one write.
- :mod:`palimpsest.projections.commands.decisions`: Taking decisions: operations that
  change labels on someone's behalf.
- :mod:`palimpsest.projections.commands.erasure`: Erasure: remove content and the lineage
  derived from it, and say what went.
- :mod:`palimpsest.projections.commands.forgetting_policy`: The tenant's forgetting
  policy: set by an administrator, read by the decay cycle.
- :mod:`palimpsest.projections.commands._idempotency`: Looking up the recorded response of
  an ``Idempotency-Key``.
- :mod:`palimpsest.projections.commands.judgment`: The tenant's judgment policy: whether the
  forgetting pass may judge its memories, and its daily budget.
- :mod:`palimpsest.projections.commands.memories`: The memory writes a route calls by
  name: ``create_memory`` and ``revise_memory``, one call each that follows through
  to the domain and the recorder.
- :mod:`palimpsest.projections.commands.memory`: Writing memories: a new memory, a new
  version of one, an edge between two (and its retraction), and the evidence
  check every citation goes through.
- :mod:`palimpsest.projections.commands._policy`: The deployment's capture policy: what the
  write path needs from the settings.
- :mod:`palimpsest.projections.commands.proposals`: Proposals: recording a judge's
  verdicts, and a person applying or rejecting them.
- :mod:`palimpsest.projections.commands._retention`: The tenant's retention of observation
  bytes: reading it, and setting it.
- :mod:`palimpsest.projections.commands.review_sessions`: The review page's sign-ins, kept
  in the database so every process sees them.
- :mod:`palimpsest.projections.commands._settlement`: Settling a potential conflict: the
  caller decides that one memory supersedes the other, or that both stand.
- :mod:`palimpsest.projections.commands._spec`: Write specs: what a caller asks to write,
  the role it needs, and how it is applied.
- :mod:`palimpsest.projections.commands.tenant_deletion`: Tenant deletion: close a tenant,
  then erase everything it holds in batches.
- :mod:`palimpsest.projections.commands.tokens`: Tenants, principals and bearer tokens:
  issuing them and authenticating them.
- :mod:`palimpsest.projections.commands.unit_of_work`: One request's unit of work: the
  caller, the aggregates it loads and changes,
- :mod:`palimpsest.projections.commands.writer`: The write path: check roles, build events
  on aggregates, then save once.
"""

from __future__ import annotations

__all__ = [
    "caller",
    "collapse_guard",
    "consolidation",
    "contributions",
    "cycle",
    "decisions",
    "erasure",
    "forgetting_policy",
    "judgment",
    "memories",
    "memory",
    "proposals",
    "review_sessions",
    "tenant_deletion",
    "tokens",
    "unit_of_work",
    "writer",
]
