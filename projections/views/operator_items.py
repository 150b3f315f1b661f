"""What a person judges: the pass's items with ids, scope, times and evidence.

A model reads the lean state of :func:`palimpsest.domain.judge_state.render_state`
(its prompt stays as it was); a person answering ``POST /v1/forgetting/verdicts``
needs more: the memory ids (texts repeat across scopes), scope and project of
every side, when each was recorded and last touched, and the excerpts each was
formed from, with their source. Refs are the model's (``s0``, ``s0n1``, ``p0``),
and :func:`items_digest` names one listing, so a verdict may name its item by
ref and be refused when the listing moved on (another verdict took an item
out, new memories came in) instead of landing on another item.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palimpsest.domain.judge_state import PairItem, SingleItem, neighbour_ref
from palimpsest.domain.memory import Memory
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.views._evidence_excerpts import evidence_excerpts

if TYPE_CHECKING:
    from collections.abc import Sequence
    from uuid import UUID

    from palimpsest.domain.judge_state import JudgeItem, MemoryView
    from palimpsest.projections.store.eventlog import EventLog
    from palimpsest.projections.views._evidence_excerpts import EvidenceExcerpt

__all__ = ["items_digest", "operator_items"]


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _side(
    view: MemoryView, evidence: dict[UUID, list[EvidenceExcerpt]], ref: str | None = None
) -> dict[str, Any]:
    side: dict[str, Any] = {} if ref is None else {"ref": ref}
    side |= {
        "memoryId": str(view.memory_id),
        "type": view.memory_type,
        "scope": view.scope,
        "project": view.project,
        "topic": view.topic,
        "content": view.content,
        "recordedAt": _time(view.recorded_at),
        "lastTouchedAt": _time(view.last_touched_at),
        "evidence": [e.model_dump(mode="json") for e in evidence.get(view.memory_id, [])],
    }
    return side


def _views(items: Sequence[JudgeItem]) -> list[MemoryView]:
    views: list[MemoryView] = []
    for item in items:
        if isinstance(item, PairItem):
            views += [item.older, item.newer]
        else:
            views += [item.memory, *item.newer]
    return views


def operator_items(
    log: EventLog, tenant_id: UUID, items: Sequence[JudgeItem], *, now: datetime
) -> list[dict[str, Any]]:
    """Return the items as a person reads them: each side with its id, scope, project,
    whole content, times and evidence excerpts (JSON-ready)."""
    ids = sorted({v.memory_id for v in _views(items)}, key=str)
    memories = [m for m in aggregates_of(log, tenant_id, ids).values() if isinstance(m, Memory)]
    evidence = evidence_excerpts(log, tenant_id, memories, now=now)
    shown: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, SingleItem):
            shown.append(
                {
                    "ref": item.ref,
                    "kind": "single",
                    "memory": _side(item.memory, evidence),
                    "newer": [
                        _side(view, evidence, neighbour_ref(item, i))
                        for i, view in enumerate(item.newer)
                    ],
                }
            )
        else:
            shown.append(
                {
                    "ref": item.ref,
                    "kind": "pair",
                    "older": _side(item.older, evidence),
                    "newer": _side(item.newer, evidence),
                    "similarity": round(item.similarity, 2),
                }
            )
    return shown


def items_digest(items: Sequence[JudgeItem]) -> str:
    """Return a short digest of which memories each ref names, and in which version: equal
    for two listings exactly when every ref means the same thing in both."""
    named = [
        [item.ref, *(f"{v.memory_id}:{v.version_id}" for v in _views([item]))] for item in items
    ]
    encoded = json.dumps(named, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]
