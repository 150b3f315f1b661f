"""Recall on conversations: LoCoMo's development questions, per category and mode.

Usage: python tests/benchmarks/locomo_recall.py [--k 10] [--modes hybrid,vector,text]
           [--distractors 100000 [--data-dir D]] [--dump PATH] [--dataset DIR]

Loads LoCoMo's development split (``../shared/datasets/locomo/``, its README): each
session as an observation captured at the session's date (its turns, one per line), and
every dialogue turn of the five conversations as a ``note`` memory (``Speaker: text``,
with the shared photo's caption) citing its line, so that its time is the session's;
one scope per conversation, in a tenant per mode (the same turns in each, so that no
mode's access stamps break another's ties: :func:`_store`) of a fresh embedded
PostgreSQL, through the write path, the revision drain and the indexing
drain with the configured model (all-MiniLM-L6-v2). The memory's id is the turn's
citation: the benchmark keeps which turn (``dia_id``) each memory holds. Then asks
every question with evidence through the real ``recall`` (k 10; the API's code path
without HTTP) in each mode, and prints, per category and in all:

- hit@k: at least one evidence turn among the results;
- all@k: every evidence turn among them;
- latency, once :data:`WARM_UP` questions were asked uncounted (then each mode's
  questions in turn, from no recorded access): ``recall``'s own search time (search,
  ranking and access stamping: the ``search`` part of the route's ``Server-Timing``,
  without the query's embedding), p50 and p99, beside the same nearest-neighbour query
  through raw psycopg as the owner (LIMIT k, the scope as its filter) after each
  question of every mode; the query's embedding inside recall (each
  question's first) and the model's own in this process, p50 and p99.

With ``--distractors N`` the conversations sit among N generated memories of the same
tenant (``tests/benchmarks/recall.py``'s corpus: the knowledge-updates statements split
into sentences, then templated sentences, ``tests/benchmarks/sentences.py``), and the
questions are asked across the tenant, without a scope, one mode after the other, each
from no recorded access (the modes share the tenant); the knowledge-updates
questions (``recall_hybrid.py``'s) are asked among them too, per label and mode
(recall@10: a sentence of the answering statement in the first ten). ``--data-dir``
keeps the store for the next run (loading 100,000 and embedding them takes minutes).

``--dump PATH`` also writes, per question, the candidates of each list (the vector
search's 40 nearest in its scope, exact, and the text search's 40 best) as JSON lines,
for replaying ranking choices offline.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands._spec import Ref
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import (
    authenticate,
    create_tenant,
    issue_token,
    list_tenants,
)
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
from palimpsest.projections.recall.recalled import RecallMode
from palimpsest.projections.recall.search import RecallQuery, recall, search
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.benchmarks.recall import _questions_among, forget_accesses
from tests.benchmarks.sentences import dataset_sentences, sentences

LOCOMO = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "locomo"
"""The development split; ``--dataset`` names another folder of the same files (the
held-out conversations): every conversation its turns hold is loaded and asked."""
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TENANT = "locomo-recall"
WARM_UP = 30
"""Questions asked once in every mode before the measured run, not counted."""
POOL = 40
"""Candidates per list in the dump: what recall asks for at k 10 (4 x k)."""


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _turn_text(row: dict[str, Any]) -> str:
    text = f"{row['speaker']}: {row['text']}"
    if row.get("caption"):
        text += f" [shares a photo: {row['caption']}]"
    return text


def _writer(runtime: Runtime) -> Writer:
    return Writer(
        runtime.log,
        CapturePolicy(timedelta(days=36500), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )


def _write(runtime: Runtime, caller: Caller, memories: list[tuple[str, str]]) -> list[UUID]:
    """Write ``memories`` (scope, text) as notes; return their ids, in order."""
    writer = _writer(runtime)
    ids: list[UUID] = []
    for start in range(0, len(memories), 1000):
        specs = [
            MemorySpec("note", scope, None, None, text, (), None, 1.0)
            for scope, text in memories[start : start + 1000]
        ]
        ids += [UUID(r["id"]) for r in writer.write(caller, specs, batch=True).body["results"]]
        print(f"\rloading: {len(ids):,}/{len(memories):,}", end="", flush=True)
    print(flush=True)
    return ids


def _write_sessions(runtime: Runtime, caller: Caller, turns: list[dict[str, Any]]) -> None:
    """Write each session as an observation captured at its date, and its turns as notes
    citing their lines of it, a session per request."""
    writer = _writer(runtime)
    sessions: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for turn in turns:
        sessions[(turn["conversation"], turn["session"])].append(turn)
    written = 0
    for (conversation, _), said in sessions.items():
        lines = [_turn_text(t) for t in said]
        captured = datetime.fromisoformat(said[0]["session_date"].replace("Z", "+00:00"))
        specs: list[WriteSpec] = [
            ObservationSpec("\n".join(lines), "text/plain", None, captured, False)
        ]
        start = 0
        for line in lines:
            evidence = (EvidenceSpec(Ref(0), start, start + len(line)),)
            specs.append(MemorySpec("note", conversation, None, None, line, evidence, None, 1.0))
            start += len(line) + 1
        writer.write(caller, specs, batch=True)
        written += len(lines)
        print(f"\rloading turns: {written:,}/{len(turns):,}", end="", flush=True)
    print(flush=True)


def _catch_up(runtime: Runtime) -> None:
    started = time.perf_counter()
    while drain_revisions(runtime.log, limit=2000).claimed:
        pass
    done = 0
    while (report := index_pending(runtime.log, runtime.embedder, limit=256)).embedded:
        done += report.embedded
        rate = done / (time.perf_counter() - started)
        print(f"\rindexing drain: {done:,} embedded, {rate:,.0f}/s", end="", flush=True)
    print(f"\ncaught up in {time.perf_counter() - started:.0f} s", flush=True)
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("ANALYZE")  # what autovacuum would have done by now


def _store(
    runtime: Runtime, distractors: int, modes: tuple[RecallMode, ...], dataset: Path = LOCOMO
) -> tuple[dict[RecallMode, Caller], dict[UUID, str]]:
    """Return each mode's caller and the turn (``conversation/dia_id``) each memory
    holds: loaded now into a fresh store, or found in a kept one.

    Without distractors each mode asks in a tenant of its own holding the same turns:
    every recall stamps an access on what it returns, and salience breaks equal
    scores, so a mode asked after another in one tenant would have its ties broken
    towards what the other just found (text mode's hit@10 read 0.655 so, 0.632 with
    its ties broken at random). Among distractors the modes share the one tenant, and
    each mode's questions start from no recorded access (:func:`_locomo`)."""
    turns = _rows(dataset / "turns.jsonl")
    names = {mode: TENANT if distractors else f"{TENANT}-{mode}" for mode in modes}
    known = {entry.name: entry.tenant_id for entry in list_tenants(runtime.log)}
    callers: dict[RecallMode, Caller] = {}
    for mode, name in names.items():
        if name in known:
            token = issue_token(runtime.log, known[name], "bench", "admin").token
        else:
            token = create_tenant(runtime.log, name).token
            caller = authenticate(runtime.log, token)
            known[name] = caller.tenant_id
            if distractors:
                corpus = (list(dataset_sentences()) + sentences(distractors, seed=11))[:distractors]
                _write(
                    runtime, caller, [(("user", "team")[i % 2], t) for i, t in enumerate(corpus)]
                )
            _write_sessions(runtime, caller, turns)
        callers[mode] = authenticate(runtime.log, token)
    _catch_up(runtime)
    scopes = sorted({t["conversation"] for t in turns})
    with runtime.database.owner_connection() as conn:
        found = conn.execute(
            "SELECT m.memory_id, m.scope, convert_from(p.content, 'UTF8')"
            f' FROM "{runtime.database.schema}".memory_embeddings m'
            f' JOIN "{runtime.database.schema}".payloads p ON p.digest = m.content_digest'
            " WHERE m.scope = ANY(%s)",
            (scopes,),
        ).fetchall()
    by_text = {(t["conversation"], _turn_text(t)): t["dia_id"] for t in turns}
    turn_of = {
        memory_id: f"{scope}/{by_text[(scope, content)]}" for memory_id, scope, content in found
    }
    return callers, turn_of


def _raw_latency(runtime: Runtime, vector: list[float], scope: str | None, k: int) -> float:
    """The nearest-neighbour query through raw psycopg as the owner (no RLS), in ms: in a
    scope exact (as recall searches a selection that small), else on the index."""
    schema = runtime.database.schema
    literal = "[" + ",".join(map(repr, vector)) + "]"
    distance = "(embedding::vector(384) <=> %s::vector(384))"
    statement = (
        f'SELECT memory_id FROM "{schema}".memory_embeddings WHERE dimension = 384'
        + (f" AND scope = %s ORDER BY {distance} + 0" if scope else f" ORDER BY {distance}")
        + f" LIMIT {k}"
    )
    params = (scope, literal) if scope else (literal,)
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("SET hnsw.ef_search = 100")
        started = time.perf_counter()
        conn.execute(statement, params).fetchall()
        return (time.perf_counter() - started) * 1000


def _dump(
    runtime: Runtime, caller: Caller, question: dict[str, Any], scope: str | None, out: Any
) -> None:
    embedder = runtime.embedder
    [vector] = embedder.embed([question["question"]])
    common: dict[str, Any] = {
        "vector": vector,
        "model_id": embedder.model_id,
        "dimension": embedder.dimension,
        "where": RecallQuery(question["question"], 10, scope=scope),
        "now": datetime.now(UTC),
        "exact": scope is not None,
        "limit": POOL,
    }
    by_vector = search(runtime.log, caller.tenant_id, **common)
    by_text = search(runtime.log, caller.tenant_id, words=True, **common)
    out.write(
        json.dumps(
            {
                "conversation": question["conversation"],
                "qa_index": question["qa_index"],
                "vector": [[str(r["memory_id"]), r["similarity"]] for r in by_vector],
                "text": [
                    [str(r["memory_id"]), r["text_score"], r["word_share"], r["similarity"]]
                    for r in by_text
                ],
            }
        )
        + "\n"
    )


def _locomo(
    runtime: Runtime,
    callers: dict[RecallMode, Caller],
    turn_of: dict[UUID, str],
    modes: tuple[RecallMode, ...],
    k: int,
    scoped: bool,
    dump: Path | None,
    dataset: Path = LOCOMO,
) -> None:
    questions = [q for q in _rows(dataset / "qa.jsonl") if q["evidence"]]
    hits: dict[RecallMode, dict[int, list[int]]] = {m: defaultdict(list) for m in modes}
    alls: dict[RecallMode, dict[int, list[int]]] = {m: defaultdict(list) for m in modes}
    search_ms: dict[RecallMode, list[float]] = {m: [] for m in modes}
    embed_ms: list[float] = []
    raw_ms: list[float] = []
    out = dump.open("w") if dump else None
    # Warm up as a running service is warm (each pooled connection's prepared
    # statements, the store's pages in shared buffers), as recall.py does: a store
    # just opened answered its first queries several times slower, and at 100,000
    # memories those few set the p99 (42.5 against 24.9 ms warm, 2026-12-07).
    for question in questions[:WARM_UP]:
        for mode in modes:
            recall(
                runtime.log,
                runtime.embedder,
                callers[mode].tenant_id,
                RecallQuery(question["question"], k, mode=mode),
                now=datetime.now(UTC),
            )
        [vector] = runtime.embedder.embed([question["question"]])
        _raw_latency(runtime, vector, None, k)
    model_ms: list[float] = []
    embedded = {q["question"] for q in questions[:WARM_UP]}  # the warm-up's, remembered
    # One mode at a time, each from no recorded access: every recall stamps what it
    # returns and salience breaks equal scores, so a mode asked after another in one
    # tenant (among distractors) had its ties broken towards what the other had just
    # found. The raw baseline is measured beside every mode's questions.
    for mode in modes:
        forget_accesses(runtime)
        for question in questions:
            own = question["conversation"]
            scope = own if scoped else None
            evidence = {f"{own}/{e}" for e in question["evidence"]}
            found = recall(
                runtime.log,
                runtime.embedder,
                callers[mode].tenant_id,
                RecallQuery(question["question"], k, scope=scope, mode=mode),
                now=datetime.now(UTC),
            )
            got = {turn_of.get(item.id) for item in found.items}
            hits[mode][question["category"]].append(bool(evidence & got))
            alls[mode][question["category"]].append(evidence <= got)
            search_ms[mode].append(found.search_ms)
            if mode != "text" and question["question"] not in embedded:
                embed_ms.append(found.embed_ms)  # its first embedding: later modes remember it
                embedded.add(question["question"])
            started = time.perf_counter()
            [vector] = runtime.embedder.embed([question["question"]])
            model_ms.append((time.perf_counter() - started) * 1000)
            raw_ms.append(_raw_latency(runtime, vector, scope, k))
            if out and mode == modes[0]:
                _dump(runtime, callers[modes[0]], question, scope, out)
    if out:
        out.close()
    where = "own conversation's scope" if scoped else "across the tenant, no scope"
    print(f"\nLoCoMo ({dataset}), {len(questions)} questions with evidence, {where}, k {k}")
    names = [f"{CATEGORIES[c]} ({len(hits[modes[0]][c])})" for c in sorted(CATEGORIES)]
    print("mode | hit@k | all@k | " + " | ".join(f"{n} hit / all" for n in names))
    for mode in modes:
        every_hit = [h for c in hits[mode].values() for h in c]
        every_all = [h for c in alls[mode].values() for h in c]
        cells = [
            f"{statistics.mean(hits[mode][c]):.3f} / {statistics.mean(alls[mode][c]):.3f}"
            for c in sorted(CATEGORIES)
        ]
        print(
            f"{mode} | {statistics.mean(every_hit):.3f} | {statistics.mean(every_all):.3f} | "
            + " | ".join(cells)
        )
    print("\nlatency (ms) | p50 | p99")
    for mode in modes:
        print(
            f"recall search, {mode} | {statistics.median(search_ms[mode]):.1f}"
            f" | {_pct(search_ms[mode], 0.99):.1f}"
        )
    print(
        f"raw psycopg nearest-neighbour baseline | {statistics.median(raw_ms):.1f}"
        f" | {_pct(raw_ms, 0.99):.1f}"
    )
    if embed_ms:
        print(
            "query embedding inside recall, each question's first"
            f" | {statistics.median(embed_ms):.1f} | {_pct(embed_ms, 0.99):.1f}"
        )
    print(
        f"the model embedding one question in this process | {statistics.median(model_ms):.1f}"
        f" | {_pct(model_ms, 0.99):.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--modes", default="hybrid,vector,text")
    parser.add_argument("--distractors", type=int, default=0)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--no-knowledge-updates", action="store_true")
    parser.add_argument("--dataset", type=Path, default=LOCOMO, help="a LoCoMo split's folder")
    args = parser.parse_args()
    modes: tuple[RecallMode, ...] = tuple(args.modes.split(","))
    keep = args.data_dir is not None
    temporary = None if keep else tempfile.TemporaryDirectory(prefix="palimpsest-locomo-")
    data_dir = args.data_dir or Path(temporary.name)  # type: ignore[union-attr]
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    runtime.load_embedder()
    try:
        callers, turn_of = _store(runtime, args.distractors, modes, args.dataset)
        with runtime.database.owner_connection() as conn:
            count = conn.execute(
                f'SELECT count(*) FROM "{runtime.database.schema}".memory_embeddings'
            ).fetchone()
        print(f"memories embedded: {count[0] if count else 0:,}", flush=True)
        gc.freeze()  # as `palimpsest serve` does once started
        _locomo(
            runtime,
            callers,
            turn_of,
            modes,
            args.k,
            not args.distractors,
            args.dump,
            args.dataset,
        )
        if args.distractors and not args.no_knowledge_updates:
            _questions_among(runtime, callers[modes[0]])
    finally:
        runtime.close()
        if temporary:
            temporary.cleanup()
        else:
            print(f"data directory: {data_dir}")


if __name__ == "__main__":
    main()
