"""Reads: what the log and the read models say, each answer a typed record.
Imports :mod:`palimpsest.projections.store` and :mod:`domain`, never
:mod:`palimpsest.projections.commands`.

Modules:

- :mod:`palimpsest.projections.views.access_buffer`: Access stamps buffered in this
  process and written in batches, off the read path.
- :mod:`palimpsest.projections.views.access_stamps`: Access counts: the tuning state
  salience reads, stamped by reads.
- :mod:`palimpsest.projections.views.as_of`: As-of reads: what was believed at a log
  position, or at a time.
- :mod:`palimpsest.projections.views.belief_facts`: What the log records about memories,
  as the projection function takes it.
- :mod:`palimpsest.projections.views.candidates`: Contradiction candidates: similar
  memories that might conflict, never a verdict.
- :mod:`palimpsest.projections.views.current_beliefs`: Current beliefs: one memory's, or a
  filtered page of them, with the watermark.
- :mod:`palimpsest.projections.views.current_reads`: Reads by id in one round trip: one
  memory's current belief, or a batch of them.
- :mod:`palimpsest.projections.views.cycles`: Recorded decay cycles: each one's report, as
  its ``CycleCompleted`` event holds it, and the texts a person needs beside its ids.
- :mod:`palimpsest.projections.views.decay_inputs`: What the decay cycle reads: live
  memories with their score inputs, recent activity, likely duplicates, and the
  fade label.
- :mod:`palimpsest.projections.views.decision_records`: Decision records: one decision as
  ``GET /v1/decisions/{id}`` explains it.
- :mod:`palimpsest.projections.views.erasures`: Erasure as reads show it: a placeholder
  naming the erasure, in place of content.
- :mod:`palimpsest.projections.views._escaped`: Logged text made servable: lone surrogates
  escaped on the way out.
- :mod:`palimpsest.projections.views._evidence_excerpts`: What a person reads beside a
  memory: its current version's cited excerpts, with source.
- :mod:`palimpsest.projections.views.export`: Tenant export: everything a tenant owns, as
  JSON lines, from one snapshot.
- :mod:`palimpsest.projections.views.listing`: What listings of memories filter and page
  by, as SQLAlchemy Core conditions.
- :mod:`palimpsest.projections.views.memory_times`: Reading live memories' times from
  the log: the one query the forgetting pass and the decay cycle share.
- :mod:`palimpsest.projections.views.observations`: Observation reads: an observation's
  recorded metadata and milestones, its bytes, and the tenant's observations
  page by page.
- :mod:`palimpsest.projections.views.operator_items`: What a person judges: the pass's
  items with ids, scope, times and evidence.
- :mod:`palimpsest.projections.views._payloads`: Content from the payload store:
  observation bytes and version texts, by digest.
- :mod:`palimpsest.projections.views.proposals`: Proposals for review: open (or decided)
  verdicts with both memories side by side.
- :mod:`palimpsest.projections.views.publications`: Waiting for revision without holding
  a thread: publication notices.
- :mod:`palimpsest.projections.views.read_model_parts`: A tenant's read models in
  disjoint parts, each replayed apart from the others.
- :mod:`palimpsest.projections.views.read_models`: Every read model, recomputed from the
  log in memory.
- :mod:`palimpsest.projections.views.receipts`: Erasure receipts: what an erasure or a
  tenant deletion removed, and whether it is done.
- :mod:`palimpsest.projections.views.record`: The base of every read's answer: an
  immutable pydantic model, declared once.
- :mod:`palimpsest.projections.views.reflections`: Reflections, read apart from memories:
  only when a caller asks for them.
- :mod:`palimpsest.projections.views.revision_status`: How far revision has caught up:
  per tenant, and over all tenants for metrics.
- :mod:`palimpsest.projections.views.statement`: Pieces the reads' SQLAlchemy Core
  statements share, and their compiled text.
- :mod:`palimpsest.projections.views.table_writers`: The read models the views room keeps
  in step with the log, written in each write's transaction.
- :mod:`palimpsest.projections.views.timeline`: History reads: a memory's whole record,
  and the tenant's event feed.
- :mod:`palimpsest.projections.views.version_cache`: The one resident cache: decoded
  memories at a version, for as-of reads.
- :mod:`palimpsest.projections.views.version_texts`: The text of current versions, for
  reads that serve a belief with its content.
- :mod:`palimpsest.projections.views.versions`: Version reads: a memory's recorded
  attributes and every version, with its content.
- :mod:`palimpsest.projections.views._write_times`: When each write became visible: the end
  of the write a log position falls in.
"""

from __future__ import annotations

__all__ = [
    "access_buffer",
    "access_stamps",
    "as_of",
    "belief_facts",
    "candidates",
    "current_beliefs",
    "current_reads",
    "cycles",
    "decay_inputs",
    "decision_records",
    "erasures",
    "export",
    "listing",
    "memory_times",
    "observations",
    "operator_items",
    "proposals",
    "publications",
    "read_model_parts",
    "read_models",
    "receipts",
    "record",
    "reflections",
    "revision_status",
    "statement",
    "table_writers",
    "timeline",
    "version_cache",
    "version_texts",
    "versions",
]
