"""Contradiction candidates on real statement pairs: which labels become candidates.

Usage: python tests/benchmarks/candidates.py [--dataset PATH] [--type fact]

Loads ``knowledge-updates/dev.jsonl`` (real older/newer user statements
labelled ``supersedes``, ``coexists`` or ``unrelated``) as memories of one
type and scope in a fresh tenant of a fresh embedded PostgreSQL, through
the write path, the revision drain and the indexing drain with the real
model. Then, for each newer statement, asks the candidate query
(:func:`palimpsest.projections.views.candidates.potential_contradictions`, floor 0) which
memories it might contradict, and reports, for floors 0.50 to 0.90:

- per label, the share of pairs whose older statement is among the newer
  one's candidates (for ``supersedes`` this is what the floor must keep
  high; for ``unrelated`` what it must keep low);
- the number of candidates per memory (every memory asked), mean, median
  and 90th percentile: what a judge would have to read.

It measures and prints; it asserts nothing. docs/candidates.md holds the
results and what they say about the default floor.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.candidates import potential_contradictions

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"
FLOORS = (0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.82, 0.85, 0.90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--type", default="fact", help="memory type given to every statement")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    texts = sorted({p["older"] for p in pairs} | {p["newer"] for p in pairs})
    print(f"{len(pairs)} pairs, {len(texts)} distinct statements", flush=True)

    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        from datetime import UTC, datetime, timedelta

        writer = Writer(
            runtime.log,
            CapturePolicy(timedelta(days=30), timedelta(hours=24)),
            lambda: datetime.now(UTC),
        )
        caller = authenticate(runtime.log, create_tenant(runtime.log, "candidates").token)
        ids: dict[str, UUID] = {}
        versions: dict[str, UUID] = {}
        for start in range(0, len(texts), 500):
            chunk = texts[start : start + 500]
            specs = [MemorySpec(args.type, "user", None, None, t, (), None, 1.0) for t in chunk]
            results = writer.write(caller, specs, batch=True).body["results"]
            for text, result in zip(chunk, results, strict=True):
                ids[text] = UUID(result["id"])
                versions[text] = UUID(result["version_id"])
        while drain_revisions(runtime.log).claimed:
            pass
        started = time.perf_counter()
        embedder = runtime.embedder
        while index_pending(runtime.log, embedder, limit=128).embedded:
            pass
        print(f"embedded {len(texts)} in {time.perf_counter() - started:.1f} s", flush=True)

        similar: dict[str, dict[UUID, float]] = {}
        for text in texts:
            found = potential_contradictions(
                runtime.log, caller.tenant_id, ids[text], versions[text], 0.0
            )
            similar[text] = {i.memory_id: i.similarity for i in found.items}

        labels = sorted({p["label"] for p in pairs})
        header = "floor | " + " | ".join(
            f"{label} (n={sum(p['label'] == label for p in pairs)})" for label in labels
        )
        print("\nshare of pairs that become candidates (older among the newer's candidates)")
        print(header + " | candidates per memory: mean / median / p90 / max")
        for floor in FLOORS:
            shares = []
            for label in labels:
                subset = [p for p in pairs if p["label"] == label]
                hit = sum(similar[p["newer"]].get(ids[p["older"]], -1.0) >= floor for p in subset)
                shares.append(f"{hit / len(subset):.2f}")
            counts = [sum(s >= floor for s in similar[t].values()) for t in texts]
            p90 = statistics.quantiles(counts, n=10)[-1]
            print(
                f"{floor:.2f} | "
                + " | ".join(shares)
                + f" | {statistics.mean(counts):.2f} / {statistics.median(counts):.0f}"
                f" / {p90:.0f} / {max(counts)}"
            )
        print("\nsimilarity of each pair's two statements, by label: median (p10-p90)")
        for label in labels:
            sims = sorted(
                similar[p["newer"]].get(ids[p["older"]], 0.0) for p in pairs if p["label"] == label
            )
            deciles = statistics.quantiles(sims, n=10)
            print(f"{label}: {statistics.median(sims):.3f} ({deciles[0]:.3f}-{deciles[-1]:.3f})")
        runtime.close()


if __name__ == "__main__":
    main()
