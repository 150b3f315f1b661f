"""Hybrid recall on real questions: recall@5/@10 for vector, text and hybrid modes.

Usage: python tests/benchmarks/recall_hybrid.py [--dataset PATH] [--grid]

Loads every distinct statement of ``knowledge-updates/dev.jsonl`` (real
LongMemEval user turns and MemFail preferences) as a memory of one tenant,
drains and embeds them (all-MiniLM-L6-v2), then asks each pair's
``subject_hint`` (the LongMemEval question, or the MemFail category) and
checks whether the statement that answers it is among the first 5 and 10:

- ``supersedes``: the newer statement (the current answer to the question);
- ``coexists``: the pair's newer statement (one of several right answers: each
  (category, statement) is asked once);
- ``unrelated`` pairs carry no question: their statements are distractors.

Each mode is a real ``recall`` (the API's code path, without HTTP). With
``--grid`` it also prints the fusion's recall@5/@10 for other words' shares
(``TEXT_SHARE``) and full leads (``FULL_LEAD``), computed from the same two candidate
lists (hybrid's: the text list by word weight, 2k of them): how the defaults in
``projections/recall/_fusion.py`` were checked on this development split.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall._fusion import FULL_LEAD, TEXT_SHARE, fuse
from palimpsest.projections.recall._relevance import Nearest
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.recalled import RecallMode
from palimpsest.projections.recall.search import RecallQuery, recall, search
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"
MODES: tuple[RecallMode, ...] = ("vector", "text", "hybrid")
POOL = 40
"""Candidates per list in the grid: what recall asks for at k = 10 (4 x k)."""


def answered_questions(pairs: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    """Return (question, answering statement) per label, each asked once."""
    out: dict[str, list[tuple[str, str]]] = {}
    for pair in pairs:
        if pair["subject_hint"]:
            asked = (pair["subject_hint"], pair["newer"])
            if asked not in out.setdefault(pair["label"], []):
                out[pair["label"]].append(asked)
    return out


def _load(runtime: Runtime, texts: list[str]) -> tuple[Any, dict[str, UUID]]:
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, create_tenant(runtime.log, "recall-hybrid").token)
    ids: dict[str, UUID] = {}
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        specs = [MemorySpec("fact", "user", None, None, t, (), None, 1.0) for t in chunk]
        results = writer.write(caller, specs, batch=True).body["results"]
        for text, result in zip(chunk, results, strict=True):
            ids[text] = UUID(result["id"])
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=128).embedded:
        pass
    return caller, ids


def _hits(ranked: list[UUID], wanted: UUID) -> tuple[int, int]:
    return int(wanted in ranked[:5]), int(wanted in ranked[:10])


def _grid(
    runtime: Runtime, caller: Any, ids: dict[str, UUID], asked: dict[str, list[tuple[str, str]]]
) -> None:
    """Recall@5/@10 of the fusion for other parameters, from the same candidate lists."""
    embedder = runtime.embedder
    now = datetime.now(UTC)
    lists: dict[
        str, list[tuple[UUID, list[tuple[UUID, float]], list[tuple[UUID, float]], float]]
    ] = {}
    for label, questions in asked.items():
        for question, answer in questions:
            [vector] = embedder.embed([question])
            common: dict[str, Any] = {
                "vector": vector,
                "model_id": embedder.model_id,
                "dimension": embedder.dimension,
                "where": RecallQuery(question, 10),
                "now": now,
                "exact": True,
                "limit": POOL,
            }
            by_vector = sorted(
                search(runtime.log, caller.tenant_id, **common),
                key=lambda r: (-(r["similarity"] or 0.0), str(r["memory_id"])),
            )
            text_common = {**common, "where": RecallQuery(question, 10, mode="hybrid")}
            by_text = sorted(
                search(runtime.log, caller.tenant_id, words=True, **{**text_common, "limit": 20}),
                key=lambda r: (-(r["word_weight"] or 0.0), str(r["memory_id"])),
            )
            similarities = [round(r["similarity"] or 0.0, 3) for r in by_vector]
            lists.setdefault(label, []).append(
                (
                    ids[answer],
                    [(r["memory_id"], s) for r, s in zip(by_vector, similarities, strict=True)],
                    [(r["memory_id"], r["word_weight"] or 0.0) for r in by_text],
                    Nearest.of(similarities).background,
                )
            )
    print("\nfusion grid (recall@5 / recall@10 per label)")
    print("words' share | full lead | " + " | ".join(sorted(lists)))
    for share in (0.2, 0.3, 0.4, 0.5, 0.6):
        for lead in (0.15, 0.25, 0.35):
            cells = []
            for label in sorted(lists):
                at5 = at10 = 0
                for wanted, vector_list, text_list, background in lists[label]:
                    fused = fuse(
                        vector_list,
                        text_list,
                        background=background,
                        text_share=share,
                        full_lead=lead,
                    )
                    order = sorted(
                        fused,
                        key=lambda m: (
                            -round(fused[m].score, 3),
                            fused[m].vector_rank or 10**6,
                            str(m),
                        ),
                    )
                    five, ten = _hits(order, wanted)
                    at5, at10 = at5 + five, at10 + ten
                n = len(lists[label])
                cells.append(f"{at5 / n:.3f} / {at10 / n:.3f}")
            print(f"{share} | {lead} | " + " | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--grid", action="store_true", help="also print the fusion grid")
    parser.add_argument("--grid-only", action="store_true", help="print the fusion grid only")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    texts = sorted({p["older"] for p in pairs} | {p["newer"] for p in pairs})
    asked = answered_questions(pairs)
    print(
        f"{len(pairs)} pairs, {len(texts)} distinct statements as memories; questions: "
        + ", ".join(f"{label} {len(q)}" for label, q in sorted(asked.items()))
        + f"; fusion: words' share {TEXT_SHARE}, full lead {FULL_LEAD}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        caller, ids = _load(runtime, texts)
        print("label | questions | " + " | ".join(f"{m} @5 / @10" for m in MODES))
        for label, questions in sorted(asked.items()) if not args.grid_only else ():
            cells = []
            for mode in MODES:
                at5 = at10 = 0
                for question, answer in questions:
                    found = recall(
                        runtime.log,
                        runtime.embedder,
                        caller.tenant_id,
                        RecallQuery(question, 10, mode=mode),
                        now=datetime.now(UTC),
                    )
                    five, ten = _hits([i.id for i in found.items], ids[answer])
                    at5, at10 = at5 + five, at10 + ten
                cells.append(f"{at5 / len(questions):.3f} / {at10 / len(questions):.3f}")
            print(f"{label} | {len(questions)} | " + " | ".join(cells), flush=True)
        if args.grid or args.grid_only:
            _grid(runtime, caller, ids, asked)
        runtime.close()


if __name__ == "__main__":
    main()
