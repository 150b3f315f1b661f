"""Evaluate the forgetting pass's judge on labelled pairs: precision, calibration, collapses.

Usage::

    python tests/benchmarks/eval_forgetting.py [--labels FILE] [--per-label N]
        [--judge live-smollm2 | --judge openai --url URL --model NAME [--constraint none]]
        [--plot PNG] [--save JSONL] [--min-proposals N] [--target P] [--dry-run]
    python tests/benchmarks/eval_forgetting.py --report JSONL [--model NAME]

On demand, never in the default test run. ``live-smollm2`` (the default)
starts ``llama_cpp.server`` with SmolLM2-135M-Instruct (the ``judge-local``
extra); ``openai`` points the ordinary client at any OpenAI-compatible
endpoint (``PALIMPSEST_JUDGE_API_KEY``, timeouts, retries and batch limits
come from the environment, as for the service: docs/judge.md). The plot needs
the ``eval`` extra (matplotlib).

What it does:

1. Loads the labelled pairs (default ``../shared/datasets/knowledge-updates/
   dev.jsonl``; ``--per-label N`` keeps the first N of each label, in file
   order) as memories of one type (``fact``) in ONE scope of a throwaway
   tenant in a throwaway embedded PostgreSQL, through the write path: each
   statement an observation captured at its real date (the earliest, for a
   statement in several pairs) and a memory citing it. MemFail's
   ``coexists`` rows have no dates: the older statement of the i-th is
   captured at 2023-02-01 09:00 plus i hours, the newer 30 days later (their
   order does not change what is correct: anything but keep on them is
   wrong). Every statement is a distractor for every other, as in the
   candidate study (docs/candidates.md).
2. Loads the recurring-episode fixture (``tests/fixtures/recurring_episodes.
   jsonl``): a daily stand-up on 20 working days and a weekly one-on-one on
   8, as ``event`` memories (scope ``team``), and near-identical ``fact``
   restatements of two routines (scope ``routine``), each at its own date.
3. Opts the tenant in (a budget it cannot spend), indexes everything with the
   real embedding model, and runs the real pass once at ``now`` (the latest
   date plus 60 days, 04:30 UTC, so everything is stale), with the caps on
   singles and pairs lifted so that every candidate is judged, every batch
   sent, and the thresholds of the environment (``PALIMPSEST_THRESHOLD_*``).
   A wrapper around the judge keeps each item and its verdict.

It reports, per the seed's eval plan, with each item's truth taken from the
labels of what the judge was shown:

- an **update** item is a pair whose older and newer sides are a
  ``supersedes`` pair (in that order), or a single whose newer neighbours
  include its ``supersedes`` successor; on it a supersede (naming the
  successor), an archive (of the older) and a conflict (with the successor)
  are correct, a keep is wrong;
- every other item (a ``coexists`` or ``unrelated`` pair, a pair the labels
  do not pair, a single whose successor was not shown) is still valid: keep
  is correct, anything else wrong;
- precision of archive and supersede proposals, each and combined, at each
  action's threshold, per memory type (all labelled statements are
  ``fact``); conflict precision; the keep rate on still-valid items (per
  label); expected calibration error of the chosen action's probability
  (ten equal bins) with a reliability plot; the AUC of P(supersede) for
  update pairs against the other pairs;
- the chosen thresholds: per action, the smallest probability giving the
  best precision with at least ``--min-proposals`` (10) proposals; none when
  no probability gives that many, or when the best precision is below
  ``--target`` (0.95, the seed's bar for archive precision);
- how many labelled pairs became candidates (a pair, or a single showing the
  successor), and the recurring-episode collapses: a proposal to archive or
  supersede an ``event`` memory (by another), which must be zero (events are
  never candidates), and what the judge did with the routine's restatements;
- the time: loading, the pass, seconds per item and per request.

``--save`` writes each judged item (what it showed, the verdict and its
distribution) as JSON lines; ``--report`` recomputes every figure (and the
plot) from such a file without loading or judging anything.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.domain.judge_state import JudgeItem, PairItem, SingleItem, neighbour_ref
from palimpsest.domain.limits import MAX_DAILY_JUDGE_CALLS, MAX_DAILY_JUDGE_TOKENS
from palimpsest.domain.verdicts import ACTIONS, Verdict
from palimpsest.projections.commands._spec import Ref
from palimpsest.projections.commands.judgment import JudgmentSpec
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    Writer,
    WriteSpec,
)
from palimpsest.projections.drains.forgetting_pass import judge_items, run_pass
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment.judge import ItemFailure, Judge, JudgeUsage
from palimpsest.projections.judgment.settings import JudgeSettings
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT.parent / "shared/datasets/knowledge-updates/dev.jsonl"
EPISODES = ROOT / "tests/fixtures/recurring_episodes.jsonl"
PLOT = ROOT / "docs/judge-reliability.png"
LABELS = ("supersedes", "coexists", "unrelated")
N_CTX = 8192
LIVE_BATCH_CHARS = 24_000
"""The live server's context is 8,192 tokens, and a request runs at about 3.7
characters a token: batches that would pass this many characters are split."""
BINS = 10
PROPOSING = ("archive", "supersede", "conflict")
SHOWN = ("supersedes", "update", "coexists", "unrelated", "unlabelled", "no-update")
"""What an item showed the judge (:attr:`Judged.label`), in the order reported."""
UNDATED_START = datetime(2023, 2, 1, 9, 0, tzinfo=UTC)


def _date(text: str) -> datetime:
    """``2023/05/25 (Thu) 20:21`` as a UTC time."""
    return datetime.strptime(text[:10] + text[16:], "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


@dataclass(frozen=True)
class Statement:
    """One memory to load."""

    content: str
    captured_at: datetime
    memory_type: str
    scope: str


def _labelled(path: Path, per_label: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if per_label is None:
        return rows
    return [r for label in LABELS for r in [x for x in rows if x["label"] == label][:per_label]]


def _statements(rows: list[dict[str, Any]]) -> dict[str, Statement]:
    """Each distinct statement of the labelled rows, at its date (see the module's docstring)."""
    dates: dict[str, datetime] = {}
    undated = 0
    for row in rows:
        if row["older_date"] is None or row["newer_date"] is None:
            older = UNDATED_START + timedelta(hours=undated)
            undated += 1
            sides = {"older": older, "newer": older + timedelta(days=30)}
        else:
            sides = {s: _date(row[f"{s}_date"]) for s in ("older", "newer")}
        for side, when in sides.items():
            dates[row[side]] = min(dates.get(row[side], when), when)
    return {text: Statement(text, when, "fact", "user") for text, when in dates.items()}


def _episodes(path: Path) -> list[Statement]:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        Statement(x["content"], datetime.fromisoformat(x["captured_at"]), x["type"], x["scope"])
        for x in lines
    ]


def _load(runtime: Runtime, statements: Sequence[Statement]) -> tuple[UUID, list[UUID]]:
    """Write the statements as memories of a new tenant, opt it in, index; return the
    tenant and each statement's memory, in order."""
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=3650), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    caller = authenticate(runtime.log, create_tenant(runtime.log, "eval-forgetting").token)
    ids: list[UUID] = []
    for start in range(0, len(statements), 250):
        chunk = statements[start : start + 250]
        specs: list[WriteSpec] = []
        for i, s in enumerate(chunk):
            specs.append(ObservationSpec(s.content, "text/plain", None, s.captured_at, False))
            evidence = (EvidenceSpec(Ref(2 * i), 0, len(s.content)),)
            specs.append(
                MemorySpec(s.memory_type, s.scope, None, None, s.content, evidence, None, 1.0)
            )
        results = writer.write(caller, specs, batch=True).body["results"]
        ids += [UUID(results[2 * i + 1]["id"]) for i in range(len(chunk))]
    budget = JudgmentSpec(True, MAX_DAILY_JUDGE_CALLS, MAX_DAILY_JUDGE_TOKENS)
    writer.write(caller, [budget], batch=False)
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=128).embedded:
        pass
    return caller.tenant_id, ids


class Watching:
    """A judge that keeps every item it is asked about with its result, and shows progress."""

    def __init__(self, inner: Judge, total: int) -> None:
        self.inner = inner
        self.total = total
        self.seen: list[tuple[JudgeItem, Verdict | ItemFailure]] = []
        self.usage_sum = JudgeUsage()
        self.started = time.perf_counter()

    @property
    def model(self) -> str:
        """The judge's model."""
        return self.inner.model

    @property
    def usage(self) -> JudgeUsage:
        """What the judge's last call cost."""
        return self.inner.usage

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        """The judge's batches."""
        return self.inner.batches(now, items)

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        """Judge, keep each item with its result, and print progress."""
        results = self.inner.judge(now, items)
        self.seen += zip(items, results, strict=True)
        self.usage_sum = self.usage_sum + self.inner.usage
        done, elapsed = len(self.seen), time.perf_counter() - self.started
        eta = elapsed / done * (self.total - done)
        print(
            f"  judged {done}/{self.total} items, {elapsed:.0f} s, about {eta:.0f} s left",
            file=sys.stderr,
            flush=True,
        )
        return results


@contextmanager
def _judge(args: argparse.Namespace) -> Iterator[tuple[OpenAICompatibleJudge, str]]:
    """The judge the arguments name, and a description of it."""
    if args.judge == "live-smollm2":
        from tests.benchmarks.llama_server import MODEL_ALIAS, llama_server, smollm2_gguf

        with llama_server(n_ctx=N_CTX) as url:
            judge = OpenAICompatibleJudge(
                url, MODEL_ALIAS, timeout_s=3600, retries=1, max_chars=LIVE_BATCH_CHARS
            )
            yield judge, f"{smollm2_gguf().name} on llama_cpp.server (n_ctx {N_CTX}, 2 threads)"
        return
    if not (args.url and args.model):
        sys.exit("--judge openai needs --url and --model")
    settings = JudgeSettings()  # the key, timeouts, retries and batch limits of the env
    key = settings.judge_api_key
    yield (
        OpenAICompatibleJudge(
            args.url,
            args.model,
            None if key is None else key.get_secret_value(),
            settings.judge_timeout_s,
            settings.judge_retries,
            constraint=args.constraint,
            logprobs=settings.judge_logprobs,
            max_items=settings.judge_batch_items,
            max_chars=settings.judge_batch_chars,
        ),
        f"{args.model} at {args.url}",
    )


@dataclass
class Judged:
    """One judged item, what the labels say it is, and the verdict."""

    kind: str
    memory_type: str
    scope: str
    label: str
    """``supersedes``, ``coexists``, ``unrelated`` (a labelled pair), ``update`` (a
    single showing its successor), ``unlabelled`` (a pair the labels do not pair),
    ``no-update`` (a single not showing a successor), or ``episode`` (the fixture)."""
    truth: str
    """``update`` or ``valid``."""
    action: str | None
    """The verdict, or None when the item failed."""
    right_target: bool
    """For a supersede or conflict on a single: it named the successor."""
    probability: float | None
    distribution: dict[str, float] | None
    choice_mass: float | None
    outdated: bool
    """The judged memory is the older side of a ``supersedes`` pair in the data."""
    error: str | None = None

    @property
    def correct(self) -> bool:
        """Whether the verdict is right for what the judge was shown."""
        if self.action is None:
            return False
        if self.truth == "update":
            return self.action == "archive" or (
                self.action in ("supersede", "conflict") and self.right_target
            )
        return self.action == "keep"


def _classify(
    items: list[tuple[JudgeItem, Verdict | ItemFailure]],
    text_of: dict[UUID, str],
    kind_of: dict[UUID, Statement],
    rows: list[dict[str, Any]],
) -> list[Judged]:
    label_of: dict[tuple[str, str], str] = {}
    successor: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        label_of[(row["older"], row["newer"])] = row["label"]
        if row["label"] == "supersedes":
            successor[row["older"]].add(row["newer"])
    judged = []
    for item, result in items:
        if isinstance(item, PairItem):
            older, newer = text_of[item.older.memory_id], text_of[item.newer.memory_id]
            label = label_of.get((older, newer)) or label_of.get((newer, older), "unlabelled")
            if (older, newer) not in label_of and label == "supersedes":
                label = "reversed-supersedes"  # the pass's times disagree with the data
            truth = "update" if label == "supersedes" else "valid"
            judged_id, targets = item.older.memory_id, {"": True}
        else:
            older = text_of[item.memory.memory_id]
            shown = {
                neighbour_ref(item, i): text_of[n.memory_id] in successor[older]
                for i, n in enumerate(item.newer)
            }
            truth = "update" if any(shown.values()) else "valid"
            label = "update" if truth == "update" else "no-update"
            judged_id, targets = item.memory.memory_id, shown
        statement = kind_of[judged_id]
        if statement.scope != "user":
            label, truth = "episode", "valid"
        common: dict[str, Any] = {
            "kind": "pair" if isinstance(item, PairItem) else "single",
            "memory_type": statement.memory_type,
            "scope": statement.scope,
            "label": label,
            "truth": truth,
            "outdated": bool(successor[older]),
        }
        if isinstance(result, ItemFailure):
            judged.append(
                Judged(
                    **common,
                    action=None,
                    right_target=False,
                    probability=None,
                    distribution=None,
                    choice_mass=None,
                    error=result.error,
                )
            )
            continue
        right = targets.get(result.related_ref or "", False)
        judged.append(
            Judged(
                **common,
                action=result.action,
                right_target=right,
                probability=result.probability,
                distribution=None
                if result.distribution is None
                else {str(a): p for a, p in result.distribution.items()},
                choice_mass=result.choice_mass,
            )
        )
    return judged


def _proposed(
    judged: Sequence[Judged], actions: set[str], thresholds: dict[str, float]
) -> list[Judged]:
    """The verdicts of ``actions`` at or above their threshold (what a person would see)."""
    return [
        j
        for j in judged
        if j.action in actions
        and j.probability is not None
        and j.probability >= thresholds.get(j.action, math.inf)
    ]


def _precision(proposals: Sequence[Judged]) -> str:
    if not proposals:
        return "- (0 proposals)"
    right = sum(j.correct for j in proposals)
    return f"{right / len(proposals):.2f} ({right}/{len(proposals)})"


def _choose(
    judged: Sequence[Judged], action: str, minimum: int, target: float
) -> tuple[float | None, str]:
    """The smallest probability giving the best precision with at least ``minimum``
    proposals of ``action``, and why; none when no probability gives that many, or the
    best precision is below ``target`` (a threshold that lets wrong proposals through
    most of the time is no threshold)."""
    probabilities = sorted(
        {j.probability for j in judged if j.action == action and j.probability is not None}
    )
    best: tuple[float, float, int] | None = None
    for t in probabilities:
        proposals = _proposed(judged, {action}, {action: t})
        if len(proposals) < minimum:
            break  # fewer still above
        precision = sum(j.correct for j in proposals) / len(proposals)
        if best is None or precision > best[1]:
            best = (t, precision, len(proposals))
    if not probabilities:
        return None, f"the judge never chose {action}"
    if best is None:
        return None, f"no threshold gives {minimum} proposals ({len(probabilities)} verdicts)"
    found = f"at best precision {best[1]:.2f} on {best[2]} proposals, from {best[0]:.3f}"
    if best[1] < target:
        return None, f"{found}: below the {target:.2f} target"
    return best[0], found


def _ece(judged: Sequence[Judged]) -> tuple[float, list[tuple[float, float, int, float, float]]]:
    """Expected calibration error of the chosen action's probability, and the bins
    (low, high, count, mean confidence, accuracy)."""
    scored = [(j.probability, j.correct) for j in judged if j.probability is not None]
    bins = []
    error = 0.0
    for b in range(BINS):
        low, high = b / BINS, (b + 1) / BINS
        inside = [(p, c) for p, c in scored if low <= p < high or (b == BINS - 1 and p == 1.0)]
        if not inside:
            bins.append((low, high, 0, math.nan, math.nan))
            continue
        confidence = statistics.mean(p for p, _ in inside)
        accuracy = statistics.mean(float(c) for _, c in inside)
        error += len(inside) / len(scored) * abs(accuracy - confidence)
        bins.append((low, high, len(inside), confidence, accuracy))
    return error, bins


def _auc(judged: Sequence[Judged]) -> float | None:
    scored = [
        (j.distribution["supersede"], j.truth == "update")
        for j in judged
        if j.kind == "pair" and j.distribution is not None and j.label != "episode"
    ]
    positives = [s for s, p in scored if p]
    negatives = [s for s, p in scored if not p]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def _plot(path: Path, bins: list[tuple[float, float, int, float, float]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.5, 6))
    axes.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfectly calibrated")
    filled = [b for b in bins if b[2]]
    axes.bar(
        [(low + high) / 2 for low, high, *_ in filled],
        [b[4] for b in filled],
        width=1 / BINS * 0.9,
        alpha=0.6,
        label="share right in each bin (count above)",
    )
    axes.plot(
        [b[3] for b in filled],
        [b[4] for b in filled],
        "o-",
        color="C3",
        label="share right at the bin's mean probability",
    )
    for low, high, count, _, accuracy in filled:
        axes.annotate(
            str(count), ((low + high) / 2, accuracy), ha="center", va="bottom", fontsize=8
        )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("probability of the chosen action")
    axes.set_ylabel("share of verdicts that were right")
    axes.set_title(title, fontsize=9)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, ncol=1)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _candidates_report(
    rows: list[dict[str, Any]], items: Sequence[JudgeItem], text_of: dict[UUID, str]
) -> None:
    """How many labelled pairs the pass will judge: as a pair, or as a single that
    shows the newer statement."""
    pairs = {
        frozenset((text_of[i.older.memory_id], text_of[i.newer.memory_id]))
        for i in items
        if isinstance(i, PairItem)
    }
    shown = {
        (text_of[i.memory.memory_id], text_of[n.memory_id])
        for i in items
        if isinstance(i, SingleItem)
        for n in i.newer
    }
    print("\nlabelled pairs that became candidates (judged as a pair, or as a single")
    print("showing the newer statement among its newer neighbours)")
    print("label | pairs | as a pair | as a single | either")
    for label in LABELS:
        subset = [r for r in rows if r["label"] == label]
        if not subset:
            continue
        as_pair = [r for r in subset if frozenset((r["older"], r["newer"])) in pairs]
        as_single = [r for r in subset if (r["older"], r["newer"]) in shown]
        either = {id(r) for r in as_pair} | {id(r) for r in as_single}
        n = len(subset)
        print(
            f"{label} | {n} | {len(as_pair)} ({len(as_pair) / n:.2f}) | "
            f"{len(as_single)} ({len(as_single) / n:.2f}) | {len(either)} ({len(either) / n:.2f})"
        )


def _shown_section(judged: Sequence[Judged]) -> None:
    verdicts = [j for j in judged if j.action is not None]
    print("\nverdicts by what the judge was shown (labelled statements)")
    print("shown | items | " + " | ".join(ACTIONS) + " | failed | mean P(chosen)")
    for label in SHOWN:
        subset = [j for j in judged if j.label == label]
        if not subset:
            continue
        counts = Counter(j.action for j in subset)
        chosen = [j.probability for j in subset if j.probability is not None]
        mean = f"{statistics.mean(chosen):.2f}" if chosen else "-"
        print(
            f"{label} | {len(subset)} | "
            + " | ".join(str(counts[a]) for a in ACTIONS)
            + f" | {counts[None]} | {mean}"
        )
    masses = [j.choice_mass for j in verdicts if j.choice_mass is not None]
    if masses:
        print(
            "share of the answer token's probability on the four letters: mean "
            f"{statistics.mean(masses):.2f}, min {min(masses):.2f}"
        )


def _thresholds_section(
    verdicts: Sequence[Judged], minimum: int, target: float
) -> dict[str, float]:
    """Print the precision at each threshold and the thresholds chosen; return them."""
    chosen: dict[str, float] = {}
    print(
        "\nthresholds chosen on these verdicts (the smallest probability with the best "
        f"precision and at least {minimum} proposals, if that precision reaches {target:.2f})"
    )
    for action in PROPOSING:
        t, why = _choose(verdicts, action, minimum, target)
        if t is not None:
            chosen[action] = t
        print(f"{action}: {'none meaningful' if t is None else f'{t:.3f}'} ({why})")
    print("\nprecision by threshold (a proposal: that action at or above t)")
    print("t | archive | supersede | archive + supersede | conflict")
    for t in (0.0, 0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95):
        at = dict.fromkeys(PROPOSING, t)
        print(
            f"{t:.2f} | {_precision(_proposed(verdicts, {'archive'}, at))} | "
            f"{_precision(_proposed(verdicts, {'supersede'}, at))} | "
            f"{_precision(_proposed(verdicts, {'archive', 'supersede'}, at))} | "
            f"{_precision(_proposed(verdicts, {'conflict'}, at))}"
        )
    return chosen


def _at_thresholds_section(
    judged: Sequence[Judged], verdicts: Sequence[Judged], name: str, used: dict[str, float]
) -> None:
    shown = ", ".join(f"{a} {used[a]:.3f}" for a in PROPOSING if a in used) or "none"
    print(f"\nat {name} thresholds ({shown}), per memory type")
    print("type | items | archive | supersede | archive + supersede | conflict")
    for memory_type in sorted({j.memory_type for j in judged} | {"event"}):
        subset = [j for j in verdicts if j.memory_type == memory_type]
        print(
            f"{memory_type} | {len(subset)} | "
            f"{_precision(_proposed(subset, {'archive'}, used))} | "
            f"{_precision(_proposed(subset, {'supersede'}, used))} | "
            f"{_precision(_proposed(subset, {'archive', 'supersede'}, used))} | "
            f"{_precision(_proposed(subset, {'conflict'}, used))}"
        )
    archives = _proposed(verdicts, {"archive"}, used)
    if archives:
        truly = sum(j.outdated for j in archives)
        print(
            "archives of a memory the data says is out of date (whatever was shown): "
            f"{truly}/{len(archives)}"
        )
    print("keep rate on still-valid items: keep verdicts / not proposed")
    for label in ("coexists", "unrelated", "unlabelled", "no-update"):
        subset = [j for j in verdicts if j.label == label]
        if subset:
            kept = sum(j.action == "keep" for j in subset)
            quiet = len(subset) - len(_proposed(subset, set(PROPOSING), used))
            print(
                f"  {label}: {kept / len(subset):.2f} ({kept}/{len(subset)}) / "
                f"{quiet / len(subset):.2f} ({quiet}/{len(subset)})"
            )


def _calibration_section(verdicts: Sequence[Judged], plot: Path | None, model: str) -> None:
    error, bins = _ece(verdicts)
    print(f"\nexpected calibration error (P of the chosen action, {BINS} bins): {error:.3f}")
    print("bin | verdicts | mean confidence | accuracy")
    for low, high, count, confidence, accuracy in bins:
        if count:
            print(f"{low:.1f}-{high:.1f} | {count} | {confidence:.2f} | {accuracy:.2f}")
    auc = _auc(verdicts)
    shown = "-" if auc is None else f"{auc:.2f}"
    print(f"AUC of P(supersede), update pairs against the other pairs: {shown}")
    if plot is not None:
        _plot(plot, bins, f"{model}: ECE {error:.3f} on {sum(b[2] for b in bins)} verdicts")
        print(f"reliability plot: {plot}")


def _episodes_section(judged: Sequence[Judged], runs: dict[str, dict[str, float]]) -> None:
    episodes = [j for j in judged if j.label == "episode"]
    events = [j for j in episodes if j.memory_type == "event"]
    routine = [j for j in episodes if j.memory_type != "event"]
    print("\nrecurring episodes")
    for name, used in runs.items():
        collapses = _proposed(events, {"archive", "supersede"}, used)
        merged = _proposed(routine, {"archive", "supersede"}, used)
        print(
            f"  at {name} thresholds: collapses (an event archived or superseded) "
            f"{len(collapses)}; routine restatements archived or superseded {len(merged)}"
        )
    print(f"  event items judged: {len(events)} (events are never candidates)")
    counts = Counter(j.action for j in routine)
    print(
        f"  routine fact items: {len(routine)}: "
        + ", ".join(f"{a} {counts[a]}" for a in ACTIONS if counts[a])
        + (f", failed {counts[None]}" if counts[None] else "")
    )


def report(
    judged: Sequence[Judged],
    thresholds: dict[str, float],
    limits: tuple[int, float],
    plot: Path | None,
    model: str,
) -> None:
    """Print every figure of the evaluation, and draw the reliability plot."""
    labelled = [j for j in judged if j.label != "episode"]
    verdicts = [j for j in labelled if j.action is not None]
    print(
        f"\nitems judged: {len(judged)} ({len(labelled)} about labelled statements, "
        f"{len(judged) - len(labelled)} about the recurring-episode fixture); "
        f"failed: {sum(j.action is None for j in judged)}"
    )
    _shown_section(labelled)
    chosen = _thresholds_section(verdicts, *limits)
    runs = {"the environment's": thresholds, "the chosen": chosen}
    for name, used in runs.items():
        _at_thresholds_section(judged, verdicts, name, used)
    _calibration_section(verdicts, plot, model)
    _episodes_section(judged, runs)


@dataclass
class Evaluated:
    """What one run judged, and what it cost."""

    judged: list[Judged]
    model: str
    described: str
    items: int
    calls: int
    elapsed_s: float
    usage: JudgeUsage
    pass_counts: str


def evaluate(args: argparse.Namespace, proposals: ProposalSettings) -> Evaluated | None:
    """Load the labels and the fixture into a throwaway store, run the pass with the
    judge the arguments name, and return what it judged (None for a dry run)."""
    rows = _labelled(args.labels, args.per_label)
    statements = _statements(rows)
    loaded = [*statements.values(), *_episodes(EPISODES)]
    latest = max(s.captured_at for s in loaded)
    now = (latest + timedelta(days=60)).replace(hour=4, minute=30, second=0, microsecond=0)
    counts = ", ".join(f"{k} {v}" for k, v in Counter(r["label"] for r in rows).items())
    print(
        f"{args.labels.name}: {len(rows)} pairs ({counts}), {len(statements)} statements, "
        f"one type (fact) and scope; plus {len(loaded) - len(statements)} recurring-episode "
        f"memories; now {now.isoformat()}"
    )
    settings = PassSettings(singles_cap=10_000, pairs_cap=10_000)
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        try:
            started = time.perf_counter()
            tenant_id, ids = _load(runtime, loaded)
            print(f"loaded and embedded in {time.perf_counter() - started:.1f} s", flush=True)
            model_id = runtime.embedder.model_id
            found = select_candidates(
                runtime.log, tenant_id, now=now, settings=settings, model_id=model_id
            )
            items = judge_items(runtime.log, tenant_id, found)
            text_of = {memory_id: s.content for memory_id, s in zip(ids, loaded, strict=True)}
            print(
                f"candidates: {len(found.singles)} singles, {len(found.pairs)} pairs "
                f"(caps lifted): {len(items)} items"
            )
            _candidates_report(rows, items, text_of)
            if args.dry_run:
                return None
            writer = Writer(
                runtime.log,
                CapturePolicy(timedelta(days=3650), timedelta(hours=24)),
                lambda: datetime.now(UTC),
            )
            with _judge(args) as (client, described):
                judge = Watching(client, len(items))
                started = time.perf_counter()
                done = run_pass(
                    runtime.log,
                    writer,
                    tenant_id,
                    judge,
                    now=now,
                    candidates=settings,
                    proposals=proposals,
                    model_id=model_id,
                )
                elapsed = time.perf_counter() - started
        finally:
            runtime.close()
    kind_of = dict(zip(ids, loaded, strict=True))
    pass_counts = (
        f"proposed {done.proposed}, dismissed {done.dismissed}, already open "
        f"{done.already_open}, failed {done.failed}, stopped: {done.stopped}"
    )
    return Evaluated(
        _classify(judge.seen, text_of, kind_of, rows),
        client.model,
        described,
        done.items,
        done.calls,
        elapsed,
        judge.usage_sum,
        pass_counts,
    )


def main() -> None:
    """Run the evaluation (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--labels", type=Path, default=DATASET)
    parser.add_argument("--per-label", type=int, default=None, help="first N pairs of each label")
    parser.add_argument("--judge", choices=("live-smollm2", "openai"), default="live-smollm2")
    parser.add_argument("--url", help="the endpoint's base URL (--judge openai)")
    parser.add_argument("--model", help="the model to ask for (--judge openai)")
    parser.add_argument("--constraint", choices=("gbnf", "none"), default="gbnf")
    parser.add_argument("--min-proposals", type=int, default=10)
    parser.add_argument(
        "--target", type=float, default=0.95, help="the least precision a threshold must give"
    )
    parser.add_argument("--plot", type=Path, default=PLOT)
    parser.add_argument("--save", type=Path, help="write each judged item as JSON lines")
    parser.add_argument("--report", type=Path, help="report on a --save file; judge nothing")
    parser.add_argument("--dry-run", action="store_true", help="load and count; judge nothing")
    args = parser.parse_args()
    proposals = ProposalSettings()
    if args.report:
        lines = args.report.read_text().splitlines()
        judged = [Judged(**json.loads(line)) for line in lines if line.strip()]
        limits = (args.min_proposals, args.target)
        report(judged, proposals.thresholds(), limits, args.plot, args.model or "saved verdicts")
        return
    run = evaluate(args, proposals)
    if run is None:
        return
    if args.save:
        args.save.write_text("".join(json.dumps(asdict(j)) + "\n" for j in run.judged))
        print(f"verdicts: {args.save}")
    print(f"\njudge: {run.described}")
    print(
        f"pass: {run.items} items in {run.calls} requests, {run.elapsed_s:.0f} s "
        f"({run.elapsed_s / max(run.items, 1):.2f} s per item, "
        f"{run.elapsed_s / max(run.calls, 1):.1f} s per request); {run.usage.prompt_tokens} "
        f"prompt and {run.usage.completion_tokens} completion tokens"
    )
    thresholds = ", ".join(f"{a} {t}" for a, t in proposals.thresholds().items())
    print(f"the pass recorded ({thresholds}): {run.pass_counts}")
    limits = (args.min_proposals, args.target)
    report(run.judged, proposals.thresholds(), limits, args.plot, run.model)


if __name__ == "__main__":
    main()
