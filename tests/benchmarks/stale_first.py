"""Stale first: how often recall ranks an older statement above the newer one replacing it.

Usage: python tests/benchmarks/stale_first.py [--dataset PATH] [--type fact] [--k 10]

Writes every distinct statement of ``knowledge-updates/dev.jsonl`` the way agents
do, with ``remember`` semantics: ``POST /v1/memories`` through the app (ASGI), in
date order (a statement's earliest date; the undated MemFail statements after the
dated ones, each pair's older before its newer), all of one type and one scope, no
revision, no judge; the drains run after each write, as in a serving process (the
indexing drain finds the pairs recall marks, with the tenant's word counts of the
time). Then each ``supersedes`` row's ``subject_hint`` is recalled (hybrid, k 10):

- **stale-first**: the older statement is among the results and ranks above the
  newer one (or the newer one is missing);
- for the ``coexists`` pairs (compatible preferences of one category, asked by
  their category): the share **demoted**, where the older statement ranked above its
  partner today (or the partner was missing) and no longer does (it ranks below it,
  or is gone from the results), and the share of pairs whose older statement is
  marked at all.

Measured in the same run, on the same store: **today** (no marks, no floor:
``possible_supersessions`` false, ``min_similarity`` 0), **marks** (the marks, no floor) and
**after** (marks and the default floor: what recall answers now). Then the caller
settles each conflict it was shown (``POST /v1/memories/{id}/candidates/{other}/settle``,
``supersedes`` when the dataset labels the pair so, the later-dated statement kept;
``both_stand`` otherwise): first those MCP ``remember`` showed it for each write (the
same query, :func:`~palimpsest.projections.views.candidates.potential_contradictions`
``to_judge``, recorded right after the write was indexed; settled once the figures
above are measured, so that they are a caller's that judges nothing), then those
recall shows it for the ``supersedes`` questions; the drains run, and stale-first is
measured again.

It also measures what the marks cost: recall's latency with and without them
(p50 / p99, alternating, same questions), and the time to find the pairs of every
memory again (what the indexing drain spends per memory it indexes).

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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.mcp._conflicts import MAX_CONFLICTS
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall import _conflict_marks as conflict_marks
from palimpsest.projections.recall._conflict_marks import write_marks
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.recalled import RecalledCurrent, RecalledPending
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.candidates import potential_contradictions

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"


@dataclass(frozen=True)
class Setting:
    """One way of recalling: with or without the marks and the default floor."""

    name: str
    possible_supersessions: bool
    min_similarity: float | None


def _date(text: str | None) -> datetime | None:
    """``2023/05/25 (Thu) 20:21`` as a time (None when undated)."""
    if not text:
        return None
    day, _, clock = text.partition(" (")
    return datetime.strptime(f"{day} {clock.split(') ')[1]}", "%Y/%m/%d %H:%M")


def _write_order(pairs: list[dict[str, Any]]) -> list[str]:
    """Every distinct statement in the order a user said them: dated ones by their
    earliest date, then the undated ones, each pair's older before its newer."""
    dated: dict[str, datetime] = {}
    undated: list[str] = []
    for pair in pairs:
        for side in ("older", "newer"):
            text, when = pair[side], _date(pair[f"{side}_date"])
            if when is not None:
                dated[text] = min(when, dated.get(text, when))
            elif text not in undated:
                undated.append(text)
    return sorted(dated, key=dated.__getitem__) + [t for t in undated if t not in dated]


def _catch_up(runtime: Runtime) -> float:
    started = time.perf_counter()
    while drain_revisions(runtime.log).claimed:
        pass
    while index_pending(runtime.log, runtime.embedder, limit=128).embedded:
        pass
    while drain_revisions(runtime.log).claimed:
        pass
    return time.perf_counter() - started


def _place(ids: list[UUID], memory_id: UUID) -> int:
    return ids.index(memory_id) if memory_id in ids else len(ids) + 1


def _older_above(ids: list[UUID], older: UUID, newer: UUID) -> bool:
    """The older is returned and ranks above the newer (or the newer is missing)."""
    return older in ids and _place(ids, older) < _place(ids, newer)


@dataclass
class Run:
    """One run: the store, the statements' memories and the labelled pairs."""

    runtime: Runtime
    client: TestClient
    headers: dict[str, str]
    tenant_id: UUID
    pairs: list[dict[str, Any]]
    ids: dict[str, UUID]
    k: int
    explain: bool = False

    def recalled(self, question: str, setting: Setting) -> list[RecalledCurrent | RecalledPending]:
        """What recall answers ``question`` with ``setting``."""
        return recall(
            self.runtime.log,
            self.runtime.embedder,
            self.tenant_id,
            RecallQuery(
                question,
                self.k,
                min_similarity=setting.min_similarity,
                possible_supersessions=setting.possible_supersessions,
            ),
            now=datetime.now(UTC),
        ).items

    def labelled(self, label: str) -> list[tuple[str, UUID, UUID]]:
        """The (question, older, newer) of each pair of ``label``."""
        return [
            (p["subject_hint"], self.ids[p["older"]], self.ids[p["newer"]])
            for p in self.pairs
            if p["label"] == label
        ]

    def compare(self, settings: tuple[Setting, ...]) -> None:
        """Print stale-first, the coexists demoted and marked, and recall's latency, for
        each setting, alternating over the same questions."""
        supersedes, coexists = self.labelled("supersedes"), self.labelled("coexists")
        found: dict[str, dict[str, list[UUID]]] = {s.name: {} for s in settings}
        latency: dict[str, list[float]] = {s.name: [] for s in settings}
        for question in sorted({q for q, _, _ in supersedes + coexists}):
            for setting in settings:
                started = time.perf_counter()
                items = self.recalled(question, setting)
                latency[setting.name].append((time.perf_counter() - started) * 1000)
                found[setting.name][question] = [i.id for i in items]
        print(f"\nsupersedes (n={len(supersedes)}): stale-first, k {self.k}")
        for setting in settings:
            share = statistics.mean(
                _older_above(found[setting.name][q], o, n) for q, o, n in supersedes
            )
            print(f"  {setting.name}: {share:.1%}")
        if self.explain:
            self.explain_stale(settings[-1], supersedes)
        demoted = {
            s.name: statistics.mean(
                _older_above(found["today"][q], o, n) and not _older_above(found[s.name][q], o, n)
                for q, o, n in coexists
            )
            for s in settings[1:]
        }
        below = {
            s.name: statistics.mean(
                _older_above(found["today"][q], o, n)
                and o in found[s.name][q]
                and not _older_above(found[s.name][q], o, n)
                for q, o, n in coexists
            )
            for s in settings[1:]
        }
        marked = statistics.mean(n in _marks_of(self, o) for _, o, n in coexists)
        with tenant_transaction(self.runtime.log.datastore, self.tenant_id, commit=False) as cur:
            cur.execute(
                f'SELECT count(*) AS n FROM "{self.runtime.database.schema}".conflict_marks'
            )
            row = cur.fetchone()
        pairs = int(row["n"]) if row else 0
        print(
            f"pairs stored: {pairs} among {len(self.ids)} memories "
            f"({2 * pairs / len(self.ids):.2f} per memory)"
        )
        print(
            f"coexists (n={len(coexists)}): older no longer above its partner (below it, or "
            "gone from the results): "
            + ", ".join(f"{name} {share:.1%}" for name, share in demoted.items())
            + "; of which below it, both returned: "
            + ", ".join(f"{name} {share:.1%}" for name, share in below.items())
            + f"; older marked possibly superseded by its partner: {marked:.1%}"
        )
        print("\nrecall latency, ms (p50 / p99, the same questions, alternating)")
        for setting in settings:
            values = sorted(latency[setting.name])
            p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
            print(f"  {setting.name}: {statistics.median(values):.1f} / {p99:.1f}")

    def explain_stale(self, setting: Setting, supersedes: list[tuple[str, UUID, UUID]]) -> None:
        """Print, for each stale-first question under ``setting``, where recall placed the
        older and the newer statement and why (``--explain``)."""

        def place(items: list[RecalledCurrent | RecalledPending], memory_id: UUID) -> str:
            for at, item in enumerate(items, start=1):
                if item.id == memory_id:
                    r = item.rank
                    return (
                        f"#{at} fused {r.fused} similarity {r.similarity} vector #{r.vector_rank}"
                        f" text #{r.text_rank} ({r.text_score}) {r.decided_by},"
                        f" marked by {len(item.possibly_superseded_by)}"
                    )
            return "not returned"

        for question, older, newer in supersedes:
            items = self.recalled(question, setting)
            if _older_above([i.id for i in items], older, newer):
                print(f"    {question}\n      older: {place(items, older)}")
                print(f"      newer: {place(items, newer)}")

    def settle(self, newer: UUID, older: UUID, outcomes: dict[str, int]) -> None:
        """Settle the pair as the labels say: the later statement of a ``supersedes``
        pair supersedes the other (whichever was written first), any other pair both
        stand."""
        label = {(self.ids[p["older"]], self.ids[p["newer"]]): p["label"] for p in self.pairs}
        keep, other, resolution = newer, older, "both_stand"
        if label.get((older, newer)) == "supersedes":
            resolution = "supersedes"
        elif label.get((newer, older)) == "supersedes":
            keep, other, resolution = older, newer, "supersedes"
        answer = self.client.post(
            f"/v1/memories/{keep}/candidates/{other}/settle",
            json={"resolution": resolution, "reason": "the labels say so"},
            headers=self.headers,
        )
        key = f"{resolution} {answer.status_code}"
        outcomes[key] = outcomes.get(key, 0) + 1

    def settle_what_is_shown(self, setting: Setting, shown: list[tuple[UUID, list[UUID]]]) -> None:
        """Play the caller: settle each conflict ``remember`` showed it (``shown``: each
        new memory's, in write order), then each one recall shows for the ``supersedes``
        questions, as the labels say; then measure stale-first again."""
        supersedes = self.labelled("supersedes")
        at_write: dict[str, int] = {}
        for new, conflicts in shown:
            for other in conflicts:
                self.settle(new, other, at_write)
            _catch_up(self.runtime)
        share = statistics.mean(
            _older_above([i.id for i in self.recalled(q, setting)], o, n) for q, o, n in supersedes
        )
        print(
            f"\nafter the caller settled what remember showed it (resolution and status: "
            f"{at_write}): stale-first {share:.1%}"
        )
        at_recall: dict[str, int] = {}
        for question in sorted({q for q, _, _ in supersedes}):
            for item in self.recalled(question, setting):
                for newer in item.possibly_superseded_by:
                    self.settle(newer, item.id, at_recall)
            _catch_up(self.runtime)
        share = statistics.mean(
            _older_above([i.id for i in self.recalled(q, setting)], o, n) for q, o, n in supersedes
        )
        print(f"and then what recall showed it ({at_recall}): stale-first {share:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--type", default="fact", help="memory type of every statement")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument(
        "--pair-rules", action="store_true", help="also print the share each pair rule marks"
    )
    parser.add_argument(
        "--words-from",
        type=int,
        default=conflict_marks.WORD_STATISTICS_FROM,
        help="the memories a tenant needs for pairing by words (tuning only)",
    )
    parser.add_argument(
        "--overlap",
        type=float,
        default=conflict_marks.WORD_OVERLAP,
        help="the share of rare words two memories must share to pair (tuning only)",
    )
    parser.add_argument(
        "--explain", action="store_true", help="print where each stale-first pair ranked"
    )
    args = parser.parse_args()
    conflict_marks.WORD_OVERLAP = args.overlap
    conflict_marks.WORD_STATISTICS_FROM = args.words_from
    pairs = [json.loads(line) for line in args.dataset.read_text().splitlines() if line.strip()]
    order = _write_order(pairs)
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        runtime.load_embedder()
        settings = (
            Setting("today", False, 0.0),
            Setting("marks", True, 0.0),
            Setting("after", True, None),
        )
        token = create_tenant(runtime.log, "stale-first").token
        headers = {"Authorization": f"Bearer {token}"}
        with TestClient(create_app(ApiSettings(), runtime)) as client:
            ids: dict[str, UUID] = {}
            indexed_s = 0.0
            tenant_id = authenticate(runtime.log, token).tenant_id
            shown: list[tuple[UUID, list[UUID]]] = []
            for text in order:
                written = client.post(
                    "/v1/memories",
                    json={"type": args.type, "scope": "user", "content": text},
                    headers=headers,
                )
                written.raise_for_status()
                ids[text] = UUID(written.json()["id"])
                # As a serving process does: each write indexed before the next comes.
                indexed_s += _catch_up(runtime)
                shown.append(
                    (ids[text], _shown(runtime, tenant_id, ids[text], written.json()["version_id"]))
                )
            position = {text: i for i, text in enumerate(order)}
            backwards = sum(1 for p in pairs if position[p["older"]] > position[p["newer"]])
            print(
                f"{len(pairs)} pairs, {len(order)} statements written as {args.type!r} in one "
                f"scope ({backwards} pairs' older written after its newer); drained and "
                f"indexed after each write ({indexed_s:.1f} s in all); pairs sharing "
                f"{args.overlap} of their rare words (from {args.words_from} memories), or "
                "near duplicates",
                flush=True,
            )
            _print_shown(shown, pairs, ids)
            run = Run(runtime, client, headers, tenant_id, pairs, ids, args.k, args.explain)
            run.compare(settings)
            if args.pair_rules:
                _pair_rules(run)
            _pairing_cost(runtime, tenant_id, ids, args.type, indexed_s)
            run.settle_what_is_shown(settings[-1], shown)
        runtime.close()


def _shown(runtime: Runtime, tenant_id: UUID, memory_id: UUID, version_id: str) -> list[UUID]:
    """The existing memories MCP ``remember`` shows the caller for a new one, as
    :func:`palimpsest.api.mcp._conflicts.describe_conflicts` lists them (the most
    similar first, at most :data:`~palimpsest.api.mcp._conflicts.MAX_CONFLICTS`)."""
    found = potential_contradictions(
        runtime.log,
        tenant_id,
        memory_id,
        UUID(version_id),
        runtime.embedding.conflict_floor,
        to_judge=True,
    )
    best = sorted(found.items, key=lambda c: (-c.similarity, str(c.memory_id)))
    return [c.memory_id for c in best[:MAX_CONFLICTS]]


def _print_shown(
    shown: list[tuple[UUID, list[UUID]]], pairs: list[dict[str, Any]], ids: dict[str, UUID]
) -> None:
    """How many conflicts remember showed per write, and how many labelled pairs."""
    told = {frozenset((new, other)) for new, conflicts in shown for other in conflicts}
    counts = [len(conflicts) for _, conflicts in shown]
    shares = []
    for label in ("supersedes", "coexists", "unrelated"):
        labelled = [
            frozenset((ids[p["older"]], ids[p["newer"]])) in told
            for p in pairs
            if p["label"] == label
        ]
        if labelled:
            shares.append(f"{label} {statistics.mean(labelled):.1%}")
    print(
        f"remember showed {statistics.mean(counts):.2f} conflicts per write "
        f"(max {max(counts)}); of the labelled pairs: {', '.join(shares)}",
        flush=True,
    )


def _marks_of(run: Run, older: UUID) -> set[UUID]:
    """The newer memories stored as possibly superseding ``older``."""
    with tenant_transaction(run.runtime.log.datastore, run.tenant_id, commit=False) as cur:
        cur.execute(
            f'SELECT newer_id FROM "{run.runtime.database.schema}".conflict_marks'
            " WHERE older_id = %s",
            (older,),
        )
        return {row["newer_id"] for row in cur.fetchall()}


def _pair_rules(run: Run) -> None:
    """Print, for every labelled pair, the share each pair rule would mark: cosine
    floors, and the share of rare words both hold (IDF over the tenant's memories)."""
    schema = run.runtime.database.schema
    with tenant_transaction(run.runtime.log.datastore, run.tenant_id, commit=False) as cur:
        cur.execute(f'SELECT memory_id, embedding::text AS e FROM "{schema}".memory_embeddings')
        vectors: dict[UUID, list[float]] = {
            r["memory_id"]: json.loads(r["e"]) for r in cur.fetchall()
        }
        cur.execute(f'SELECT memory_id, lexeme FROM "{schema}".memory_lexemes')
        words: dict[UUID, set[str]] = {}
        for r in cur.fetchall():
            words.setdefault(r["memory_id"], set()).add(r["lexeme"])
    held: dict[str, int] = {}
    for lexemes in words.values():
        for lexeme in lexemes:
            held[lexeme] = held.get(lexeme, 0) + 1

    def weight(lexemes: set[str]) -> float:
        return sum(math.log(len(words) / held[w]) for w in lexemes)

    def cosine(a: UUID, b: UUID) -> float:
        return float(sum(x * y for x, y in zip(vectors[a], vectors[b], strict=True)))

    def shared(a: UUID, b: UUID) -> float:
        both = weight(words[a] & words[b])
        return both / math.sqrt(weight(words[a]) * weight(words[b]) or 1.0)

    rules: dict[str, Any] = {
        "cosine >= 0.50": lambda a, b: cosine(a, b) >= 0.50,
        "cosine >= 0.30": lambda a, b: cosine(a, b) >= 0.30,
        "shared rare words >= 0.10": lambda a, b: shared(a, b) >= 0.10,
        "shared rare words >= 0.15": lambda a, b: shared(a, b) >= 0.15,
        "shared rare words >= 0.20": lambda a, b: shared(a, b) >= 0.20,
    }
    print("\npair rule | supersedes marked | coexists marked (over every labelled pair)")
    for name, rule in rules.items():
        cells = [
            statistics.mean(rule(o, n) for _, o, n in run.labelled(label))
            for label in ("supersedes", "coexists")
        ]
        print(f"{name} | {cells[0]:.2f} | {cells[1]:.2f}")


def _pairing_cost(
    runtime: Runtime, tenant_id: UUID, ids: dict[str, UUID], memory_type: str, indexed_s: float
) -> None:
    """Time finding every memory's pairs again, as the indexing drain does per batch."""
    memories = list(ids.values())
    times = []
    for start in range(0, len(memories), 64):
        batch = memories[start : start + 64]
        began = time.perf_counter()
        with tenant_transaction(runtime.log.datastore, tenant_id, commit=True) as cur:
            write_marks(
                cur,
                runtime.database.schema,
                model_id=runtime.embedder.model_id,
                dimension=runtime.embedder.dimension,
                paired=[(m, memory_type, "user", None) for m in batch],
                cleared=[],
            )
        times.append((time.perf_counter() - began) * 1000)
    print(
        f"\nfinding the pairs: {sum(times):.0f} ms for {len(memories)} memories in batches of 64 "
        f"({sum(times) / len(memories):.2f} ms per memory; the drains took "
        f"{indexed_s * 1000 / len(memories):.1f} ms per memory in all, embedding included)"
    )


if __name__ == "__main__":
    main()
