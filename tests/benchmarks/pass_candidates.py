"""Forgetting-pass pairs on real statement pairs: how many true updates become candidates.

Usage: python tests/benchmarks/pass_candidates.py [--dataset PATH] [--type fact]

Loads every statement of ``knowledge-updates/dev.jsonl`` (real older/newer
user statements labelled ``supersedes``, ``coexists`` or ``unrelated``) into
ONE type and scope of a fresh tenant in a fresh embedded PostgreSQL, through
the write path: each statement is an observation captured at its real date
(the earliest, for the few that recur; undated statements are captured at
load time) and a memory citing it, then the revision drain and the indexing
drain with the real model. Then it asks the forgetting pass's candidate query
(:func:`palimpsest.projections.recall.pass_candidates.select_candidates`, caps lifted)
for its pairs under a grid of settings, and reports:

- per label, the share of pairs that became a candidate pair (either
  orientation), and for ``supersedes`` how many of those found were oriented
  as the data says (the newer statement newer);
- candidates per memory: in how many candidate pairs each memory is (mean,
  median, 90th percentile, max), and pairs per memory;
- the query's time; and, with ``--scale N`` (default 2,000), the time of a
  whole run over N template sentences (``sentences.py``) in one scope, the
  worst case of the exact search (every memory is every other's kind).

Plain cosine ranking (``pair_fusion=cosine``) is the baseline, measured in the
same run. It measures and prints; it asserts nothing. docs/candidates.md
("Forgetting-pass pairs") holds the results and the defaults they chose.
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

from palimpsest.projections.commands._spec import Ref
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    Writer,
    WriteSpec,
)
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.benchmarks.sentences import sentences

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"
KS = (1, 2, 3, 4, 5)
FLOORS = (None, 0.2, 0.3, 0.4)
SHORTLISTS = (10, 20, 50)


def _date(text: str) -> datetime:
    """``2023/05/25 (Thu) 20:21`` as a UTC time."""
    return datetime.strptime(text[:10] + text[16:], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def _load(
    pairs: list[dict[str, Any]], memory_type: str, data_dir: Path
) -> tuple[Any, UUID, dict[str, UUID]]:
    """Start a runtime in ``data_dir`` and load every statement; return the runtime,
    the tenant and each statement's memory."""
    dates: dict[str, datetime] = {}
    for p in pairs:
        for side in ("older", "newer"):
            if p.get(f"{side}_date"):
                when = _date(p[f"{side}_date"])
                dates[p[side]] = min(dates.get(p[side], when), when)
    texts = sorted({p["older"] for p in pairs} | {p["newer"] for p in pairs})
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=3650), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, create_tenant(runtime.log, "pass-candidates").token)
    ids: dict[str, UUID] = {}
    for start in range(0, len(texts), 250):
        chunk = texts[start : start + 250]
        specs: list[WriteSpec] = []
        for i, text in enumerate(chunk):
            specs.append(ObservationSpec(text, "text/plain", None, dates.get(text), False))
            evidence = (EvidenceSpec(Ref(2 * i), 0, len(text)),)
            specs.append(MemorySpec(memory_type, "user", None, None, text, evidence, None, 1.0))
        results = writer.write(caller, specs, batch=True).body["results"]
        for i, text in enumerate(chunk):
            ids[text] = UUID(results[2 * i + 1]["id"])
    while drain_revisions(runtime.log).claimed:
        pass
    started = time.perf_counter()
    while index_pending(runtime.log, runtime.embedder, limit=128).embedded:
        pass
    print(
        f"{len(pairs)} pairs, {len(texts)} statements ({len(dates)} dated), one scope;"
        f" embedded in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return runtime, caller.tenant_id, ids


def _measure(
    runtime: Any,
    tenant_id: UUID,
    ids: dict[str, UUID],
    pairs: list[dict[str, Any]],
    labels: list[str],
    settings: PassSettings,
) -> str:
    """Run the candidate query once; return the row of figures."""
    started = time.perf_counter()
    found = select_candidates(
        runtime.log,
        tenant_id,
        now=datetime.now(UTC),
        settings=settings,
        model_id=runtime.embedder.model_id,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    newer_of = {frozenset((p.older_id, p.newer_id)): p.newer_id for p in found.pairs}
    shares = []
    oriented = ""
    for label in labels:
        subset = [(ids[p["newer"]], ids[p["older"]]) for p in pairs if p["label"] == label]
        hits = [pair for pair in subset if frozenset(pair) in newer_of]
        shares.append(f"{len(hits) / len(subset):.2f}")
        if label == "supersedes":
            right = sum(newer_of[frozenset(pair)] == pair[0] for pair in hits)
            oriented = f"{right}/{len(hits)}"
    degree = dict.fromkeys(ids.values(), 0)
    for p in found.pairs:
        degree[p.older_id] += 1
        degree[p.newer_id] += 1
    counts = list(degree.values())
    p90 = statistics.quantiles(counts, n=10)[-1]
    return (
        " | ".join(shares)
        + f" | {oriented} | {statistics.mean(counts):.2f} / {statistics.median(counts):.0f}"
        f" / {p90:.0f} / {max(counts)} | {len(found.pairs) / len(ids):.2f} | {elapsed_ms:.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--type", default="fact", help="memory type given to every statement")
    parser.add_argument("--scale", type=int, default=2000, help="memories timed in one scope")
    parser.add_argument(
        "--floors",
        default=",".join("none" if f is None else str(f) for f in FLOORS),
        help="pair floors to measure, comma-separated (none: no floor)",
    )
    parser.add_argument("--ks", default=",".join(map(str, KS)), help="pair_k values measured")
    parser.add_argument("--no-shortlists", action="store_true", help="skip the shortlist grid")
    args = parser.parse_args()
    floors = tuple(None if f == "none" else float(f) for f in args.floors.split(","))
    ks = tuple(int(k) for k in args.ks.split(","))
    pairs = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    with tempfile.TemporaryDirectory() as data_dir:
        runtime, tenant_id, ids = _load(pairs, args.type, Path(data_dir))
        try:
            _report(runtime, tenant_id, ids, pairs, floors, ks, shortlists=not args.no_shortlists)
            if args.scale:
                _time_at_scale(runtime, args.scale)
        finally:
            runtime.close()


def _report(
    runtime: Any,
    tenant_id: UUID,
    ids: dict[str, UUID],
    pairs: list[dict[str, Any]],
    floors: tuple[float | None, ...] = FLOORS,
    ks: tuple[int, ...] = KS,
    *,
    shortlists: bool = True,
) -> None:
    """Print the grid."""
    labels = sorted({p["label"] for p in pairs}, key=lambda label: label != "supersedes")
    counts = " | ".join(
        f"{label} (n={sum(p['label'] == label for p in pairs)})" for label in labels
    )
    header = (
        f"fusion | k | floor | {counts} | supersedes oriented"
        " | candidates per memory (pairs it is in): mean / median / p90 / max"
        " | pairs / memories | ms"
    )
    print("\nshare of labelled pairs that became candidate pairs (either orientation)")
    print(header)
    for fusion in ("cosine", "rrf"):
        for floor in floors:
            for k in ks:
                settings = PassSettings(
                    pair_fusion=fusion,
                    pair_k=k,
                    pair_floor=floor,
                    singles_cap=10_000,
                    pairs_cap=10_000,
                )
                row = _measure(runtime, tenant_id, ids, pairs, labels, settings)
                print(f"{fusion} | {k} | {floor} | {row}", flush=True)
    if not shortlists:
        return
    print("\nrrf: the cosine shortlist the full-text rank re-ranks (floor none)")
    print("shortlist | k | " + header.split(" | ", 3)[3])
    for shortlist in SHORTLISTS:
        for k in (2, 3):
            settings = PassSettings(
                pair_fusion="rrf",
                pair_k=k,
                pair_shortlist=shortlist,
                singles_cap=10_000,
                pairs_cap=10_000,
            )
            print(
                f"{shortlist} | {k} | {_measure(runtime, tenant_id, ids, pairs, labels, settings)}"
            )


def _time_at_scale(runtime: Any, count: int) -> None:
    """Time whole runs over ``count`` memories of one type and scope (caps as default)."""
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=3650), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, create_tenant(runtime.log, f"scale-{count}").token)
    texts = sentences(count)
    for start in range(0, count, 500):
        specs: list[WriteSpec] = [
            MemorySpec("fact", "user", None, None, text, (), None, 1.0)
            for text in texts[start : start + 500]
        ]
        writer.write(caller, specs, batch=True)
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=256).embedded:
        pass
    print(f"\na whole run over {count} memories in one scope (best of 2)")
    for fusion in ("cosine", "rrf"):
        times = []
        for _ in range(2):
            started = time.perf_counter()
            select_candidates(
                runtime.log,
                caller.tenant_id,
                now=datetime.now(UTC) + timedelta(days=60),
                settings=PassSettings(pair_fusion=fusion),
                model_id=runtime.embedder.model_id,
            )
            times.append(time.perf_counter() - started)
        print(f"{fusion}: {min(times):.2f} s", flush=True)


if __name__ == "__main__":
    main()
