"""Writes: who is asking, what they ask for, and the one path that checks their
role and records the events. Imports :mod:`projections.store` and
:mod:`domain`, never :mod:`projections.views`.

Modules:

- :mod:`projections.commands.caller`: The caller of a command: an authenticated
  principal, its tenant and its role.
- :mod:`projections.commands.capture`: Capturing observations: raw reports,
  their bytes stored apart from their event.
- :mod:`projections.commands.consolidation`: Consolidation's writes: proposing a
  merge, and folding memories into one.
- :mod:`projections.commands.contributions`: Adding support: contributions to
  an existing version, without writing its text again.
- :mod:`projections.commands.cycle`: Recording a decay cycle: its fades, its
  prunes, and its report, in one write.
- :mod:`projections.commands.decisions`: Taking decisions: operations that
  change labels on someone's behalf.
- :mod:`projections.commands.erasure`: Erasure: remove content and the lineage
  derived from it, and say what went.
- :mod:`projections.commands.forgetting_policy`: The tenant's forgetting
  policy: set by an administrator, read by the decay cycle.
- :mod:`projections.commands.idempotency`: Looking up the recorded response of
  an ``Idempotency-Key``.
- :mod:`projections.commands.judgment`: The tenant's judgment policy: whether the
  forgetting pass may judge its memories, and its daily budget.
- :mod:`projections.commands.memory`: Writing memories: a new memory, a new
  version of one, an edge between two (and its retraction), and the evidence
  check every citation goes through.
- :mod:`projections.commands.policy`: The deployment's capture policy: what the
  write path needs from the settings.
- :mod:`projections.commands.proposals`: Proposals: recording a judge's
  verdicts, and a person applying or rejecting them.
- :mod:`projections.commands.retention`: The tenant's retention of observation
  bytes: reading it, and setting it.
- :mod:`projections.commands.spec`: Write specs: what a caller asks to write,
  the role it needs, and how it is applied.
- :mod:`projections.commands.tenant_deletion`: Tenant deletion: close a tenant,
  then erase everything it holds in batches.
- :mod:`projections.commands.tokens`: Tenants, principals and bearer tokens:
  issuing them and authenticating them.
- :mod:`projections.commands.unit_of_work`: One request's unit of work: the
  caller, the aggregates it loads and changes,
- :mod:`projections.commands.writer`: The write path: check roles, build events
  on aggregates, then save once.
"""

from __future__ import annotations

__all__ = [
    "caller",
    "capture",
    "consolidation",
    "contributions",
    "cycle",
    "decisions",
    "erasure",
    "forgetting_policy",
    "idempotency",
    "judgment",
    "memory",
    "policy",
    "proposals",
    "retention",
    "spec",
    "tenant_deletion",
    "tokens",
    "unit_of_work",
    "writer",
]
