"""Recorded decay cycles: each one's report, as its ``CycleCompleted`` event holds it
with what consolidating its survivors did (``CycleConsolidated``), and the texts a
person needs beside its ids."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from palimpsest.domain.cycle import BUCKET_MEANINGS, FACTOR_MEANINGS
from palimpsest.domain.judge_state import cut
from palimpsest.domain.memory import Memory
from palimpsest.domain.proposal import Proposal
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.version_texts import version_texts

if TYPE_CHECKING:
    from palimpsest.projections.store.eventlog import EventLog

__all__ = ["LABEL_CHARS", "annotated", "cycle_report", "recent_cycles"]

LABEL_CHARS = 160
"""A memory's text beside its id is cut to this many characters."""


def cycle_report(log: EventLog, tenant_id: UUID, cycle_id: UUID) -> dict[str, Any] | None:
    """Return the report of the tenant's cycle ``cycle_id`` (None: no such cycle),
    with its id, the log position that recorded it, ``dry_run`` false, and
    ``consolidation`` once recorded. ``held_back`` and ``importance_fallbacks`` are
    absent from cycles recorded before the event carried them."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT report, position, consolidation FROM {schema}.decay_cycles"
                " WHERE cycle_id = %s",
                log.datastore.schema,
            ),
            (cycle_id,),
        )
        row = cur.fetchone()
    if row is None:
        return None
    report: dict[str, Any] = dict(row["report"])
    if row["consolidation"] is not None:
        report["consolidation"] = dict(row["consolidation"])
    return {**report, "cycle_id": cycle_id, "dry_run": False, "position": row["position"]}


def recent_cycles(log: EventLog, tenant_id: UUID, limit: int) -> list[dict[str, Any]]:
    """Return the tenant's ``limit`` latest recorded cycles, newest first: each one's id,
    snapshot time, policy version, counts and how many proposals it made."""
    with tenant_transaction(log.datastore, tenant_id, commit=False) as cur:
        cur.execute(
            schema_sql(
                "SELECT cycle_id, snapshot_at, policy_version, report FROM {schema}.decay_cycles"
                " ORDER BY position DESC LIMIT %s",
                log.datastore.schema,
            ),
            (limit,),
        )
        rows = cur.fetchall()
    return [
        {
            "cycle_id": r["cycle_id"],
            "snapshot_at": r["snapshot_at"],
            "policy_version": r["policy_version"],
            "counts": r["report"].get("counts", {}),
            "proposals": len(r["report"].get("proposals", [])),
            "archived": len(r["report"].get("archived", [])),
        }
        for r in rows
    ]


def _memory_ids(report: dict[str, Any]) -> set[str]:
    ids = set(report.get("faded", [])) | set(report.get("unfaded", []))
    ids |= set(report.get("archived", []))
    for pair in report.get("duplicates", []):
        ids |= {pair["older"], pair["newer"]}
    ids |= {row["memory_id"] for row in report.get("scores") or []}
    return ids


def annotated(log: EventLog, tenant_id: UUID, report: dict[str, Any]) -> dict[str, Any]:
    """Return ``report`` with what a person reads beside its ids: ``memories`` (each
    id's type, scope, project, topic, text cut to :data:`LABEL_CHARS`, and whether it
    is archived now), ``proposed`` (each proposal's memory and action), and what the
    factors and buckets mean. Texts are as they are now: an erased memory shows none."""
    proposals = aggregates_of(log, tenant_id, [UUID(p) for p in report.get("proposals", [])])
    proposed = [
        {"proposal_id": str(p.id), "memory_id": str(p.memory_id), "action": p.action}
        for p in proposals.values()
        if isinstance(p, Proposal)
    ]
    ids = _memory_ids(report) | {p["memory_id"] for p in proposed}
    loaded = aggregates_of(log, tenant_id, sorted((UUID(i) for i in ids), key=str))
    memories = {i: m for i, m in loaded.items() if isinstance(m, Memory)}
    live = {i: m.current_version.version_id for i, m in memories.items() if m.erased_by is None}
    texts = version_texts(log, tenant_id, live)
    labels: dict[str, dict[str, Any]] = {}
    for memory_id, memory in memories.items():
        text = texts.get(memory_id)
        content = text.content if text is not None else None
        labels[str(memory_id)] = {
            "type": memory.memory_type,
            "scope": memory.scope,
            "project": memory.project,
            "topic": memory.topic,
            "text": None if content is None else cut(content, LABEL_CHARS),
            "archived": memory.archived is not None,
        }
    return {
        **report,
        "memories": labels,
        "proposed": proposed,
        "factors_explained": dict(FACTOR_MEANINGS),
        "buckets_explained": dict(BUCKET_MEANINGS),
    }
