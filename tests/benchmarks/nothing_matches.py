"""Recall admits when nothing matches: results in the wrong scope, hits in the right one.

Usage: python tests/benchmarks/nothing_matches.py [--k 10] [--no-knowledge-updates]

Loads LoCoMo's development split (``../shared/datasets/locomo/``, its README):
every dialogue turn of the five conversations as a ``note`` memory (``Speaker:
text``, with the shared photo's caption), one scope per conversation, in one
tenant of a fresh embedded PostgreSQL, through the write path, the revision
drain and the indexing drain with the real model (all-MiniLM-L6-v2). Then asks
every question (``qa.jsonl``) through the real ``recall`` (hybrid, the default
mode; ``k`` 10):

- in its own conversation's scope: hit@k, the share of questions with evidence
  for which at least one evidence turn is among the results;
- in the next conversation's scope (conv-26's questions in conv-30's, ..., the
  last in the first's), where nothing answers it: how many results come back.

Each twice in the same run, on the same store: as recall answered before the
default floor (``min_similarity`` 0, which leaves nothing out) and with the
default floor (no ``min_similarity``). The target: at least 80% fewer results in
the wrong scope, hit@k in the right one down by at most 0.01.

Then (unless ``--no-knowledge-updates``) the same before/after on the
knowledge-updates development split, as ``tests/benchmarks/recall_hybrid.py``
asks it: recall@5/@10 of the statement that answers each ``subject_hint``
(302 statements as ``note`` memories of one scope): what the floor costs where
the questions are short and the answers loosely worded.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall._relevance import (
    MEANING_FLOOR,
    STANDOUT,
    STRONG,
    WEAK,
    WORDS_SHARE,
)
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
LOCOMO = DATASETS / "locomo"
KNOWLEDGE_UPDATES = DATASETS / "knowledge-updates" / "dev.jsonl"
CONVERSATIONS = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
FLOORS: dict[str, float | None] = {"before (min_similarity 0)": 0.0, "after (default)": None}


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _turn_text(row: dict[str, Any]) -> str:
    text = f"{row['speaker']}: {row['text']}"
    if row.get("caption"):
        text += f" [shares a photo: {row['caption']}]"
    return text


def _catch_up(runtime: Runtime) -> float:
    """Drain and index everything; return the seconds it took."""
    started = time.perf_counter()
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=256).embedded:
        pass
    return time.perf_counter() - started


def _write(runtime: Runtime, name: str, memories: list[tuple[str, str]]) -> tuple[Any, list[UUID]]:
    """Write ``memories`` (scope, text) as notes of a new tenant; return its caller and
    the ids, in order."""
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=36500), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, create_tenant(runtime.log, name).token)
    ids: list[UUID] = []
    for start in range(0, len(memories), 500):
        chunk = memories[start : start + 500]
        specs = [
            MemorySpec("note", scope, None, None, text, (), None, 1.0) for scope, text in chunk
        ]
        ids += [UUID(r["id"]) for r in writer.write(caller, specs, batch=True).body["results"]]
    return caller, ids


def _ask(
    runtime: Runtime, caller: Any, text: str, scope: str | None, k: int, floor: float | None
) -> list[UUID]:
    found = recall(
        runtime.log,
        runtime.embedder,
        caller.tenant_id,
        RecallQuery(text, k, scope=scope, min_similarity=floor),
        now=datetime.now(UTC),
    )
    return [item.id for item in found.items]


def _locomo(runtime: Runtime, k: int) -> None:
    turns = _rows(LOCOMO / "turns.jsonl")
    questions = [q for q in _rows(LOCOMO / "qa.jsonl") if q["conversation"] in CONVERSATIONS]
    caller, ids = _write(runtime, "locomo", [(t["conversation"], _turn_text(t)) for t in turns])
    turn_of = {i: f"{t['conversation']}/{t['dia_id']}" for i, t in zip(ids, turns, strict=True)}
    print(
        f"LoCoMo dev: {len(turns)} turns as notes, {len(questions)} questions "
        f"({sum(1 for q in questions if q['evidence'])} with evidence); "
        f"indexed in {_catch_up(runtime):.0f} s",
        flush=True,
    )
    hits = {name: 0 for name in FLOORS}
    counts: dict[str, list[int]] = {name: [] for name in FLOORS}
    right_counts: dict[str, list[int]] = {name: [] for name in FLOORS}
    with_evidence = 0
    for question in questions:
        own = question["conversation"]
        wrong = CONVERSATIONS[(CONVERSATIONS.index(own) + 1) % len(CONVERSATIONS)]
        evidence = {f"{own}/{e}" for e in question["evidence"]}
        with_evidence += bool(evidence)
        for name, floor in FLOORS.items():
            if evidence:
                found = _ask(runtime, caller, question["question"], own, k, floor)
                hits[name] += bool(evidence & {turn_of[i] for i in found})
                right_counts[name].append(len(found))
            counts[name].append(len(_ask(runtime, caller, question["question"], wrong, k, floor)))
    before, after = FLOORS
    print(f"\nhybrid, k {k} | hit@{k}, own scope | results, own scope | results, wrong scope")
    for name in FLOORS:
        print(
            f"{name} | {hits[name] / with_evidence:.4f} | "
            f"{statistics.mean(right_counts[name]):.2f} | {statistics.mean(counts[name]):.2f}"
        )
    fewer = 1 - statistics.mean(counts[after]) / statistics.mean(counts[before])
    change = (hits[after] - hits[before]) / with_evidence
    print(
        f"wrong scope: {fewer:.1%} fewer results (target >= 80%); hit@{k}: {change:+.4f} "
        "(target >= -0.01)",
        flush=True,
    )
    empty = sum(1 for n in counts[after] if n == 0) / len(counts[after])
    print(f"wrong-scope questions answered with no result at all, after: {empty:.1%}")


def _knowledge_updates(runtime: Runtime) -> None:
    pairs = _rows(KNOWLEDGE_UPDATES)
    texts = sorted({p["older"] for p in pairs} | {p["newer"] for p in pairs})
    asked: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        if pair["subject_hint"] and (pair["subject_hint"], pair["newer"]) not in asked.get(
            pair["label"], []
        ):
            asked.setdefault(pair["label"], []).append((pair["subject_hint"], pair["newer"]))
    caller, ids = _write(runtime, "knowledge-updates", [("user", t) for t in texts])
    id_of = dict(zip(texts, ids, strict=True))
    _catch_up(runtime)
    print(f"\nknowledge-updates dev: {len(texts)} statements as notes, one scope; hybrid")
    print("label | questions | " + " | ".join(f"{name} @5 / @10" for name in FLOORS))
    for label, questions in sorted(asked.items()):
        cells = []
        for floor in FLOORS.values():
            at5 = at10 = 0
            for question, answer in questions:
                found = _ask(runtime, caller, question, None, 10, floor)
                at5 += id_of[answer] in found[:5]
                at10 += id_of[answer] in found
            cells.append(f"{at5 / len(questions):.3f} / {at10 / len(questions):.3f}")
        print(f"{label} | {len(questions)} | " + " | ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--no-knowledge-updates", action="store_true")
    args = parser.parse_args()
    print(
        f"default floor: a query matches by meaning when its nearest memory is >= {STRONG}, "
        f"or >= {WEAK} and {STANDOUT} above the 20th nearest; then memories >= "
        f"{MEANING_FLOOR} match; by words: >= {WORDS_SHARE} of the query's words",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        runtime.load_embedder()
        try:
            _locomo(runtime, args.k)
            if not args.no_knowledge_updates:
                _knowledge_updates(runtime)
        finally:
            runtime.close()


if __name__ == "__main__":
    main()
