"""Does forgetting hurt? LoCoMo's evidence recall with and without the decay cycle.

Usage: python tests/benchmarks/forgetting_utility.py [--conversations conv-26,conv-30]
                                                      [--source turns|observations]
                                                      [--k 10] [--policy JSON]

For each conversation of the development split (``../shared/datasets/locomo/``),
two fresh tenants of one embedded PostgreSQL receive the same memories: each
dialogue turn (or each of LoCoMo's per-session observation facts) as an
observation and a ``note`` memory resting on all of it, written at its
session's date with a fake clock. One tenant runs the decay cycle
(``POST /v1/cycles``) at the end of every day of the conversation's span,
with ``auto_archive_decayed`` on so that what the cycle prunes is archived
at once and its cost is visible; the other never forgets. After the last
session each question with evidence is asked through ``POST /v1/recall``
(``k`` results, the conversation's scope) of both tenants.

A question's evidence counts as recalled when every evidence turn is among
the results (strict; ``all``) or when at least one is (lenient; ``any``);
for observations, a turn counts when a recalled observation fact cites it.
It prints, per category and overall: evidence recall without forgetting,
with forgetting, and their ratio (target >= 0.95), and the share of the
corpus archived (target >= 0.30). It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    Ref,
    Writer,
    WriteSpec,
)
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings

DATASET = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "locomo"
DEVELOPMENT = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")


@dataclass(frozen=True)
class Item:
    """One memory to write: its key (``dia_id`` or ``obs_id``), text, date, and the
    turns it stands for."""

    key: str
    text: str
    at: datetime
    turns: frozenset[str]


@dataclass(frozen=True)
class Question:
    """A question with the turns that hold its answer."""

    text: str
    category: str
    evidence: frozenset[str]


@dataclass
class Tally:
    """Questions asked and how many had all / any of their evidence recalled."""

    asked: int = 0
    all_found: int = 0
    any_found: int = 0

    def add(self, evidence: frozenset[str], found: set[str]) -> None:
        """Count one question."""
        self.asked += 1
        self.all_found += evidence <= found
        self.any_found += bool(evidence & found)


@dataclass
class Tallies:
    """Tallies per category and overall."""

    by_category: dict[str, Tally] = field(default_factory=lambda: defaultdict(Tally))
    overall: Tally = field(default_factory=Tally)

    def add(self, category: str, evidence: frozenset[str], found: set[str]) -> None:
        """Count one question in its category and overall."""
        self.by_category[category].add(evidence, found)
        self.overall.add(evidence, found)


def _rows(name: str) -> Iterator[dict[str, Any]]:
    with (DATASET / name).open() as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _items(conversation: str, source: str) -> list[Item]:
    if source == "turns":
        items = []
        for row in _rows("turns.jsonl"):
            if row["conversation"] != conversation:
                continue
            text = f"{row['speaker']}: {row['text']}"
            if row.get("caption"):
                text += f" [shares a photo: {row['caption']}]"
            at = datetime.fromisoformat(row["session_date"].replace("Z", "+00:00"))
            items.append(Item(row["dia_id"], text, at, frozenset({row["dia_id"]})))
        return items
    return [
        Item(
            row["obs_id"],
            f"{row['speaker']}: {row['fact']}",
            datetime.fromisoformat(row["session_date"].replace("Z", "+00:00")),
            frozenset(row["source_dia_ids"]),
        )
        for row in _rows("observations.jsonl")
        if row["conversation"] == conversation
    ]


def _questions(conversation: str) -> list[Question]:
    return [
        Question(row["question"], row["category_name"], frozenset(row["evidence"]))
        for row in _rows("qa.jsonl")
        if row["conversation"] == conversation and row["evidence"]
    ]


class Clock:
    """The fake clock every write and cycle of a run reads."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Store:
    """One tenant of the run: its headers and which memory stands for which item."""

    headers: dict[str, str]
    writer: Writer
    caller: Any
    items_of: dict[UUID, Item] = field(default_factory=dict)


def _tenant(runtime: Runtime, name: str, clock: Clock) -> Store:
    token = create_tenant(runtime.log, name).token
    writer = Writer(runtime.log, CapturePolicy(timedelta(days=36500), timedelta(hours=24)), clock)
    headers = {"Authorization": f"Bearer {token}"}
    return Store(headers, writer, authenticate(runtime.log, token))


def _write(store: Store, scope: str, items: Sequence[Item]) -> None:
    specs: list[WriteSpec] = []
    for i, item in enumerate(items):
        specs.append(ObservationSpec(item.text, "text/plain", None, item.at, False))
        specs.append(
            MemorySpec(
                memory_type="note",
                scope=scope,
                project=None,
                topic=None,
                content=item.text,
                evidence=(EvidenceSpec(Ref(2 * i), 0, len(item.text)),),
                model_id=None,
                trust=1.0,
            )
        )
    results = store.writer.write(store.caller, specs, batch=True).body["results"]
    for i, item in enumerate(items):
        store.items_of[UUID(results[2 * i + 1]["id"])] = item


def _catch_up(runtime: Runtime) -> None:
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=256).embedded:
        pass


def _ask(client: TestClient, store: Store, scope: str, question: Question, k: int) -> set[str]:
    answer = client.post(
        "/v1/recall",
        json={"query": question.text, "k": k, "scope": scope},
        headers=store.headers,
    )
    answer.raise_for_status()
    found: set[str] = set()
    for hit in answer.json()["items"]:
        item = store.items_of.get(UUID(hit["id"]))
        if item is not None:
            found |= item.turns
    return found


def _days(items: Sequence[Item]) -> list[datetime]:
    """Every day end from the first item's day to the last's."""
    first = min(i.at for i in items).replace(hour=23, minute=59, second=0, microsecond=0)
    last = max(i.at for i in items)
    days = []
    day = first
    while day <= last + timedelta(days=1):
        days.append(day)
        day += timedelta(days=1)
    return days


@dataclass
class Run:
    """One conversation's figures."""

    memories: int
    archived: int
    kept: Tallies
    forgetting: Tallies
    cycles: int
    seconds: float


def _run_conversation(
    runtime: Runtime,
    conversation: str,
    source: str,
    k: int,
    policy: dict[str, Any],
    cycle: Callable[[TestClient, Store], dict[str, Any]],
) -> Run:
    started = time.perf_counter()
    items = sorted(_items(conversation, source), key=lambda i: i.at)
    clock = Clock(items[0].at)
    scope = conversation
    kept = _tenant(runtime, f"utility-{conversation}-{source}-kept-{time.time_ns()}", clock)
    forgetting = _tenant(runtime, f"utility-{conversation}-{source}-cycle-{time.time_ns()}", clock)
    archived = 0
    cycles = 0
    with TestClient(create_app(ApiSettings(), runtime, clock=clock)) as client:
        if cycle is not _no_cycle:
            answer = client.put("/v1/tenant/forgetting", json=policy, headers=forgetting.headers)
            answer.raise_for_status()
        pending = list(items)
        for day_end in _days(items):
            today = [i for i in pending if i.at <= day_end]
            pending = pending[len(today) :]
            if today:
                clock.now = max(i.at for i in today)
                _write(kept, scope, today)
                _write(forgetting, scope, today)
                _catch_up(runtime)
            clock.now = day_end
            report = cycle(client, forgetting)
            cycles += 1
            archived += len(report.get("archived", []))  # the ids the cycle archived
            _catch_up(runtime)
            print(
                f"\r{conversation}: {day_end.date()} {len(items) - len(pending)}/{len(items)}"
                f" written, {archived} archived, {cycles} cycles",
                end="",
                file=sys.stderr,
                flush=True,
            )
        print(file=sys.stderr)
        kept_tallies, forgetting_tallies = Tallies(), Tallies()
        for question in _questions(conversation):
            kept_tallies.add(
                question.category, question.evidence, _ask(client, kept, scope, question, k)
            )
            forgetting_tallies.add(
                question.category,
                question.evidence,
                _ask(client, forgetting, scope, question, k),
            )
    return Run(
        len(items),
        archived,
        kept_tallies,
        forgetting_tallies,
        cycles,
        time.perf_counter() - started,
    )


def _post_cycle(client: TestClient, store: Store) -> dict[str, Any]:
    answer = client.post("/v1/cycles", json={}, headers=store.headers)
    answer.raise_for_status()
    report: dict[str, Any] = answer.json()
    return report


def _no_cycle(client: TestClient, store: Store) -> dict[str, Any]:
    return {}


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else float("nan")


def _print(runs: dict[str, Run], k: int) -> None:
    memories = sum(r.memories for r in runs.values())
    archived = sum(r.archived for r in runs.values())
    kept, forgetting = Tallies(), Tallies()
    for run in runs.values():
        for name, tally in run.kept.by_category.items():
            for source, target in ((tally, kept), (run.forgetting.by_category[name], forgetting)):
                t = target.by_category[name]
                t.asked += source.asked
                t.all_found += source.all_found
                t.any_found += source.any_found
        for source, target in ((run.kept.overall, kept), (run.forgetting.overall, forgetting)):
            target.overall.asked += source.asked
            target.overall.all_found += source.all_found
            target.overall.any_found += source.any_found
    print(f"\nmemories {memories}, archived {archived} ({_ratio(archived, memories):.1%})")
    print(f"evidence in the top {k}: without forgetting | with | ratio (target >= 0.95)")
    header = f"{'category':<12} {'n':>4}  {'all: kept':>9} {'cycle':>6} {'ratio':>6}"
    print(header + f"  {'any: kept':>9} {'cycle':>6} {'ratio':>6}")
    rows = [*sorted(kept.by_category.items()), ("overall", kept.overall)]
    for name, base in rows:
        other = forgetting.overall if name == "overall" else forgetting.by_category[name]
        all_base, all_cycle = (
            _ratio(base.all_found, base.asked),
            _ratio(other.all_found, base.asked),
        )
        any_base, any_cycle = (
            _ratio(base.any_found, base.asked),
            _ratio(other.any_found, base.asked),
        )
        print(
            f"{name:<12} {base.asked:>4}  {all_base:>9.3f} {all_cycle:>6.3f}"
            f" {_ratio(other.all_found, base.all_found):>6.3f}"
            f"  {any_base:>9.3f} {any_cycle:>6.3f} {_ratio(other.any_found, base.any_found):>6.3f}"
        )
    for name, run in runs.items():
        print(
            f"{name}: {run.memories} memories, {run.archived} archived"
            f" ({_ratio(run.archived, run.memories):.1%}), {run.cycles} cycles, {run.seconds:.0f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", default=",".join(DEVELOPMENT))
    parser.add_argument("--source", choices=("turns", "observations"), default="turns")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--policy",
        default="{}",
        help="tenant forgetting policy fields (JSON) on top of the defaults and"
        ' {"enabled": true, "auto_archive_decayed": true}',
    )
    parser.add_argument(
        "--baseline-only",
        action="store_true",
        help="skip the cycle (and the policy): both tenants keep everything",
    )
    args = parser.parse_args()
    policy = {"enabled": True, "auto_archive_decayed": True, **json.loads(args.policy)}
    cycle = _no_cycle if args.baseline_only else _post_cycle
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="palimpsest-utility-") as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        try:
            for conversation in args.conversations.split(","):
                runs[conversation] = _run_conversation(
                    runtime, conversation, args.source, args.k, policy, cycle
                )
        finally:
            runtime.close()
    print(f"policy: {json.dumps(policy)}; source: {args.source}")
    _print(runs, args.k)


if __name__ == "__main__":
    main()
