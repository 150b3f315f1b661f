"""Events, aggregates and pure policies. No I/O, no framework imports.

Modules:

- :mod:`palimpsest.domain.belief`: The projection function: what palimpsest currently
  believes about one memory.
- :mod:`palimpsest.domain.candidate_budget`: Whether a write spends its short budget
  waiting for its contradiction candidates (only while such waits pay).
- :mod:`palimpsest.domain.consolidation`: Consolidation's pure parts: which similar
  memories merge, and whose text is kept.
- :mod:`palimpsest.domain.cycle`: The ``Cycle`` aggregate: one decay cycle over a tenant,
  recorded (``CycleCompleted``).
- :mod:`palimpsest.domain.cycle_rows`: The decay cycles read model's rows, and the rules
  that make them from events.
- :mod:`palimpsest.domain.decision`: The ``Decision`` aggregate: one recorded judgment
  that changed labels.
- :mod:`palimpsest.domain.dependency`: What a write's events make other memories depend
  on.
- :mod:`palimpsest.domain.digest`: Content digests: the only trace of content that events
  may carry.
- :mod:`palimpsest.domain.edge`: Which edges may join two memories.
- :mod:`palimpsest.domain.erasure`: Which versions an erasure removes: the lineage rule,
  as a pure function.
- :mod:`palimpsest.domain.errors`: Errors raised by palimpsest.
- :mod:`palimpsest.domain.evidence`: Evidence excerpts: exact spans of an observation that
  a version cites.
- :mod:`palimpsest.domain.forgetting_policy`: The tenant's forgetting policy: how the
  decay cycle scores, buckets and evicts.
- :mod:`palimpsest.domain.importance`: Importance: how much a memory matters, whatever its
  age. One factor of retention.
- :mod:`palimpsest.domain.index_rows`: The memory and decision indexes' rows, and the
  rules that make them from events.
- :mod:`palimpsest.domain.judge_state`: What the forgetting pass shows a judge: the items,
  their rendered state, and its batches.
- :mod:`palimpsest.domain.limits`: Documented input limits, and the pure checks that
  enforce them.
- :mod:`palimpsest.domain.memory`: The ``Memory`` aggregate: a focused claim, its
  versions, support and edges.
- :mod:`palimpsest.domain.memory_time`: A memory's time: when it was last touched, for
  the forgetting pass and the decay cycle.
- :mod:`palimpsest.domain.observation`: The ``Observation`` aggregate: a raw report whose
  bytes live in the payload store.
- :mod:`palimpsest.domain.proposal`: The ``Proposal`` aggregate: a judge's verdict about a
  memory, waiting for a person.
- :mod:`palimpsest.domain.proposal_rows`: The proposals read model's rows, and the rules
  that make them from events.
- :mod:`palimpsest.domain.reflection`: The ``Reflection`` aggregate: an insight a model drew
  from several memories, kept apart.
- :mod:`palimpsest.domain.reflection_rows`: The reflections read model's rows, and the
  rules that make them from events.
- :mod:`palimpsest.domain.removal_rows`: The rows of what a write keeps or removes
  (deadlines, held content, erasures, retention, tenant deletion), and their rules.
- :mod:`palimpsest.domain.retention`: Retention deadlines, fixed once at capture.
- :mod:`palimpsest.domain.retry_after`: How long a ``Retry-After`` header asks a client
  to wait (standard library only: the Python client reads it too).
- :mod:`palimpsest.domain.retention_score`: The retention score: whether a memory stays,
  fades or leaves (seed 004).
- :mod:`palimpsest.domain.role`: Roles a principal's token grants within a tenant.
- :mod:`palimpsest.domain.salience`: Salience: how prominently a memory ranks. Demotion
  changes rank, nothing else.
- :mod:`palimpsest.domain.schedule`: When a daily job runs: a cron line of the form
  ``M H * * *`` (UTC).
- :mod:`palimpsest.domain.tenant`: The ``Tenant`` aggregate: an isolated account, its
  principals and their tokens.
- :mod:`palimpsest.domain.verdicts`: Judge verdicts: the four choices, the answers that name
  them, and their probabilities.
"""

from __future__ import annotations

__all__ = [
    "belief",
    "candidate_budget",
    "consolidation",
    "cycle",
    "cycle_rows",
    "decision",
    "dependency",
    "digest",
    "edge",
    "erasure",
    "errors",
    "evidence",
    "forgetting_policy",
    "importance",
    "index_rows",
    "judge_state",
    "limits",
    "memory",
    "memory_time",
    "observation",
    "proposal",
    "proposal_rows",
    "reflection",
    "reflection_rows",
    "removal_rows",
    "retention",
    "retention_score",
    "retry_after",
    "role",
    "salience",
    "schedule",
    "tenant",
    "verdicts",
]
