"""The judge client against a live llama_cpp.server running SmolLM2: what it measures.

Usage: python tests/benchmarks/judge_live.py [--dataset PATH] [--per-label N]

Needs the ``judge-local`` extra. Takes the first ``N`` pairs of each label of
the knowledge-updates dev split (statements of at most 600 characters, file
order; MemFail's undated ``coexists`` rows get dates a month apart) as pair
items, and judges them with the ordinary
:class:`~palimpsest.projections.judgment._openai_compatible.OpenAICompatibleJudge`:

- in batches of 12 with the grammar (the configuration docs/judge.md
  describes), then the first 12 again one per request (the baseline: no
  batch context, one request each), and once more without the grammar (what
  an endpoint that takes no grammar would get from this model);
- and prints, for each: seconds per item, the mean share of the answer
  token's probability on the four letters, the mean probability of the
  chosen action, verdict counts per label, failed items, and the rank AUC of
  P(supersede) for ``supersedes`` against the rest.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.domain.judge_state import JudgeItem, PairItem
from palimpsest.domain.verdicts import ACTIONS, Verdict
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment.judge import ItemFailure
from palimpsest.projections.recall.embedders import LocalMiniLM
from tests.benchmarks.llama_server import MODEL_ALIAS, llama_server
from tests.benchmarks.record_judge import DATASET, _date, _view

MAX_STATEMENT_CHARS = 600
N_CTX = 8192


def _auc(scores: list[tuple[float, bool]]) -> float | None:
    positives = [s for s, p in scores if p]
    negatives = [s for s, p in scores if not p]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def _report(
    name: str,
    items: list[JudgeItem],
    labels: dict[str, str],
    results: list[Verdict | ItemFailure],
    elapsed_s: float,
) -> None:
    verdicts = [r for r in results if isinstance(r, Verdict)]
    failures = [r for r in results if isinstance(r, ItemFailure)]
    masses = [v.choice_mass for v in verdicts if v.choice_mass is not None]
    chosen = [v.probability for v in verdicts if v.probability is not None]
    print(
        f"\n{name}: {len(items)} items in {elapsed_s:.1f} s = {elapsed_s / len(items):.2f} s/item"
    )
    print(
        f"  letter share of the answer token: mean {statistics.mean(masses):.3f}"
        f" (min {min(masses):.3f})"
        if masses
        else "  letter share: no distributions"
    )
    if chosen:
        print(f"  probability of the chosen action: mean {statistics.mean(chosen):.3f}")
    counts: dict[str, Counter[str]] = {}
    for v in verdicts:
        counts.setdefault(labels[v.ref], Counter())[v.action] += 1
    for label in sorted(counts):
        shown = ", ".join(f"{a} {counts[label][a]}" for a in ACTIONS if counts[label][a])
        print(f"  {label}: {shown}")
    print(f"  failed items: {len(failures)} of {len(items)}")
    for failure in failures[:3]:
        print(f"    {failure.ref}: {failure.error[:120]}")
    scored = [
        (v.distribution["supersede"], labels[v.ref] == "supersedes")
        for v in verdicts
        if v.distribution is not None
    ]
    auc = _auc(scored)
    print(f"  AUC of P(supersede), supersedes vs rest: {'-' if auc is None else f'{auc:.2f}'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--per-label", type=int, default=12)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = [
        json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()
    ]
    short = [r for r in rows if max(len(r["older"]), len(r["newer"])) <= MAX_STATEMENT_CHARS]
    chosen: list[dict[str, Any]] = []
    for label in ("supersedes", "coexists", "unrelated"):
        chosen += [r for r in short if r["label"] == label][: args.per_label]
    # Interleave the labels, so no batch holds one label only.
    chosen = [
        chosen[i] for k in range(args.per_label) for i in range(k, len(chosen), args.per_label)
    ]
    # MemFail's rows carry no dates: a month apart, older first (measurement only).
    undated = {"older_date": "2023/05/01 (Mon) 09:00", "newer_date": "2023/06/01 (Thu) 09:00"}
    chosen = [{**r, **{k: v for k, v in undated.items() if r[k] is None}} for r in chosen]
    texts = sorted({r[side] for r in chosen for side in ("older", "newer")})
    vectors = dict(zip(texts, LocalMiniLM().embed(texts), strict=True))
    items: list[JudgeItem] = []
    labels: dict[str, str] = {}
    for i, row in enumerate(chosen):
        similarity = sum(
            x * y for x, y in zip(vectors[row["older"]], vectors[row["newer"]], strict=True)
        )
        items.append(PairItem(f"p{i}", _view(row, "older"), _view(row, "newer"), similarity))
        labels[f"p{i}"] = row["label"]
    latest = max(_date(r[f"{s}_date"]) for r in chosen for s in ("older", "newer"))
    now = latest.replace(hour=4, minute=30)
    print(
        f"{len(items)} pairs: " + ", ".join(f"{k} {v}" for k, v in Counter(labels.values()).items())
    )

    with llama_server(n_ctx=N_CTX) as url:
        runs: list[tuple[str, list[JudgeItem], dict[str, Any]]] = [
            ("batches of 12, grammar", items, {"max_items": 12}),
            ("baseline: one item per request, grammar", items[:12], {"max_items": 1}),
            ("batches of 12, no grammar", items[:12], {"max_items": 12, "constraint": "none"}),
        ]
        for name, subset, options in runs:
            judge = OpenAICompatibleJudge(url, MODEL_ALIAS, None, 900.0, 0, **options)
            started = time.perf_counter()
            results = judge.judge(now, subset)
            elapsed = time.perf_counter() - started
            _report(name, subset, labels, results, elapsed)
            usage = judge.usage
            print(
                f"  {usage.calls} requests, {usage.prompt_tokens} prompt and "
                f"{usage.completion_tokens} completion tokens"
            )


if __name__ == "__main__":
    main()
