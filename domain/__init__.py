"""Events, aggregates and pure policies. No I/O, no framework imports.

Modules:

- :mod:`domain.belief`: The projection function: what palimpsest currently
  believes about one memory.
- :mod:`domain.candidate_budget`: Whether a write spends its short budget
  waiting for its contradiction candidates (only while such waits pay).
- :mod:`domain.consolidation`: Consolidation's pure parts: which similar
  memories merge, and whose text is kept.
- :mod:`domain.cycle`: The ``Cycle`` aggregate: one decay cycle over a tenant,
  recorded (``CycleCompleted``).
- :mod:`domain.decision`: The ``Decision`` aggregate: one recorded judgment
  that changed labels.
- :mod:`domain.dependency`: What a write's events make other memories depend
  on.
- :mod:`domain.digest`: Content digests: the only trace of content that events
  may carry.
- :mod:`domain.edge`: Which edges may join two memories.
- :mod:`domain.erasure`: Which versions an erasure removes: the lineage rule,
  as a pure function.
- :mod:`domain.errors`: Errors raised by palimpsest.
- :mod:`domain.evidence`: Evidence excerpts: exact spans of an observation that
  a version cites.
- :mod:`domain.forgetting_policy`: The tenant's forgetting policy: how the
  decay cycle scores, buckets and evicts.
- :mod:`domain.importance`: Importance: how much a memory matters, whatever its
  age. One factor of retention.
- :mod:`domain.judge_state`: What the forgetting pass shows a judge: the items,
  their rendered state, and its batches.
- :mod:`domain.limits`: Documented input limits, and the pure checks that
  enforce them.
- :mod:`domain.memory`: The ``Memory`` aggregate: a focused claim, its
  versions, support and edges.
- :mod:`domain.observation`: The ``Observation`` aggregate: a raw report whose
  bytes live in the payload store.
- :mod:`domain.proposal`: The ``Proposal`` aggregate: a judge's verdict about a
  memory, waiting for a person.
- :mod:`domain.reflection`: The ``Reflection`` aggregate: an insight a model drew
  from several memories, kept apart.
- :mod:`domain.retention`: Retention deadlines, fixed once at capture.
- :mod:`domain.retention_score`: The retention score: whether a memory stays,
  fades or leaves (seed 004).
- :mod:`domain.role`: Roles a principal's token grants within a tenant.
- :mod:`domain.salience`: Salience: how prominently a memory ranks. Demotion
  changes rank, nothing else.
- :mod:`domain.schedule`: When a daily job runs: a cron line of the form
  ``M H * * *`` (UTC).
- :mod:`domain.tenant`: The ``Tenant`` aggregate: an isolated account, its
  principals and their tokens.
- :mod:`domain.verdicts`: Judge verdicts: the four choices, the answers that name
  them, and their probabilities.
"""

from __future__ import annotations

__all__ = [
    "belief",
    "candidate_budget",
    "consolidation",
    "cycle",
    "decision",
    "dependency",
    "digest",
    "edge",
    "erasure",
    "errors",
    "evidence",
    "forgetting_policy",
    "importance",
    "judge_state",
    "limits",
    "memory",
    "observation",
    "proposal",
    "reflection",
    "retention",
    "retention_score",
    "role",
    "salience",
    "schedule",
    "tenant",
    "verdicts",
]
