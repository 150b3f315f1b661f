"""The judge batches the recordings were made for, read from ``tests/fixtures/judge/``.

``tests/benchmarks/record_judge.py`` picks real statements from the
knowledge-updates dev split, writes them here as ``batches.jsonl`` (one batch
a line: its name, the client's options, ``now`` and the items), and records
the model server's answers beside it. Tests rebuild the same items from this
file, so the client sends byte-identical requests and the recordings answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from palimpsest.domain.judge_state import JudgeItem, MemoryView, PairItem, SingleItem
from palimpsest.projections.judgment._prompt import Constraint

__all__ = [
    "BATCHES_FILE",
    "FIXTURES",
    "JudgeBatch",
    "batch_to_json",
    "load_batches",
]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "judge"
BATCHES_FILE = FIXTURES / "batches.jsonl"


@dataclass(frozen=True)
class JudgeBatch:
    """One recorded judge call: the client's options and what it was asked."""

    name: str
    constraint: Constraint
    logprobs: bool
    max_items: int
    now: datetime
    items: tuple[JudgeItem, ...]
    labels: dict[str, str]
    """Each item's label in the dataset (``supersedes``, ``unrelated``), by ref."""


def _view_to_json(view: MemoryView) -> dict[str, Any]:
    return {
        "memory_id": str(view.memory_id),
        "memory_type": view.memory_type,
        "scope": view.scope,
        "project": view.project,
        "topic": view.topic,
        "content": view.content,
        "recorded_at": view.recorded_at.isoformat(),
        "last_touched_at": view.last_touched_at and view.last_touched_at.isoformat(),
    }


def _view_from_json(data: dict[str, Any]) -> MemoryView:
    touched = data["last_touched_at"]
    return MemoryView(
        memory_id=UUID(data["memory_id"]),
        memory_type=data["memory_type"],
        scope=data["scope"],
        project=data["project"],
        topic=data["topic"],
        content=data["content"],
        recorded_at=datetime.fromisoformat(data["recorded_at"]),
        last_touched_at=datetime.fromisoformat(touched) if touched else None,
    )


def _item_to_json(item: JudgeItem) -> dict[str, Any]:
    if isinstance(item, PairItem):
        return {
            "kind": "pair",
            "ref": item.ref,
            "older": _view_to_json(item.older),
            "newer": _view_to_json(item.newer),
            "similarity": item.similarity,
        }
    return {
        "kind": "single",
        "ref": item.ref,
        "memory": _view_to_json(item.memory),
        "newer": [_view_to_json(view) for view in item.newer],
    }


def _item_from_json(data: dict[str, Any]) -> JudgeItem:
    if data["kind"] == "pair":
        return PairItem(
            data["ref"],
            _view_from_json(data["older"]),
            _view_from_json(data["newer"]),
            float(data["similarity"]),
        )
    return SingleItem(
        data["ref"],
        _view_from_json(data["memory"]),
        tuple(_view_from_json(view) for view in data["newer"]),
    )


def batch_to_json(batch: JudgeBatch) -> str:
    """Return ``batch`` as one line of ``batches.jsonl``."""
    return json.dumps(
        {
            "name": batch.name,
            "constraint": batch.constraint,
            "logprobs": batch.logprobs,
            "max_items": batch.max_items,
            "now": batch.now.isoformat(),
            "labels": batch.labels,
            "items": [_item_to_json(item) for item in batch.items],
        },
        ensure_ascii=False,
    )


def load_batches(path: Path = BATCHES_FILE) -> dict[str, JudgeBatch]:
    """Return the recorded batches, by name."""
    found: dict[str, JudgeBatch] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        data = json.loads(line)
        found[data["name"]] = JudgeBatch(
            name=data["name"],
            constraint=data["constraint"],
            logprobs=bool(data["logprobs"]),
            max_items=int(data["max_items"]),
            now=datetime.fromisoformat(data["now"]),
            items=tuple(_item_from_json(item) for item in data["items"]),
            labels=dict(data["labels"]),
        )
    return found
