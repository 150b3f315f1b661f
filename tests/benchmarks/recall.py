"""Recall at 100,000 memories of real sentences: quality, latency, embedding throughput.

Usage: python tests/benchmarks/recall.py [--memories 100000] [--queries 200]
                                         [--data-dir D]

A fresh embedded PostgreSQL (or ``--data-dir`` of an earlier run, which
skips loading). Loads sentences (tests/benchmarks/sentences.py: the
knowledge-updates statements split into sentences, and templated ones; no
random vectors) as memories through the write path, drains revisions, then
measures, in one run:

- embedding throughput: the indexing drain over every memory (read, embed,
  write with the HNSW index maintained), memories/s, against two baselines:
  the raw embedder on a sample of the same sentences, before and after the
  drain (averaged), and the embedder's own rate on the drain's batches
  (its time inside the drain): the ratios (target >= 0.8);
- recall@5/@10 of the knowledge-updates questions (``recall_hybrid.py``'s)
  among the whole corpus, per mode: the statements that answer them are
  among the memories, split into sentences;
- recall@10 of the index query recall uses against exact search, for
  held-out sentences (target >= 0.95);
- server-side latency of ``POST /v1/recall`` (the ``search`` figure of its
  Server-Timing header: search, ranking and access stamping, without the
  query's embedding), p50 and p99, with no filter and with a selective one
  (1% of memories), in hybrid mode (the default: vector and text search
  fused), vector mode and text mode, beside the same nearest-neighbour query
  through raw psycopg as the owner (target p99 <= 30 ms).

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, issue_token
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.search import HNSW_OVERFETCH, RecallQuery, search
from palimpsest.projections.recall.search import recall as search_recall
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.access_buffer import close_access_buffer
from tests.benchmarks.recall_hybrid import MODES, answered_questions
from tests.benchmarks.sentences import DATASET, dataset_sentences, sentences, statement_sentences

_TYPES = ("fact", "preference", "decision", "note", "event")
_RARE = "rare-project"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _load(runtime: Runtime, caller: Caller, texts: list[str]) -> None:
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    rng = random.Random(3)
    started = time.perf_counter()
    for start in range(0, len(texts), 1000):
        specs = [
            MemorySpec(
                rng.choice(_TYPES),
                rng.choice(("user", "team")),
                _RARE if rng.random() < 0.01 else rng.choice(("alpha", "beta", "gamma", None)),
                None,
                text,
                (),
                None,
                1.0,
            )
            for text in texts[start : start + 1000]
        ]
        writer.write(caller, specs, batch=True)
        print(f"\rloading: {start + len(specs):,}/{len(texts):,}", end="", flush=True)
    print(f"\nloaded in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    drained = 0
    while (report := drain_revisions(runtime.log, limit=2000)).claimed:
        drained += report.published
        print(f"\rdrained: {drained:,}", end="", flush=True)
    print(f"\ndrained in {time.perf_counter() - started:.0f} s", flush=True)


def _raw_rate(embedder: Any, texts: list[str]) -> float:
    started = time.perf_counter()
    for start in range(0, len(texts), 256):
        embedder.embed(texts[start : start + 256])
    return len(texts) / (time.perf_counter() - started)


def _embedding_throughput(
    runtime: Runtime, texts: list[str], sample: int
) -> tuple[float, float, float]:
    """Return (raw embedder sentences/s on a sample, before and after the drain, averaged;
    the embedder's own rate inside the drain, on the drain's batches; the indexing
    drain's memories/s over every memory)."""
    embedder = runtime.embedder
    embedder.embed(texts[:64])  # load the model outside the timings
    chosen = random.Random(5).sample(texts, sample)
    before = _raw_rate(embedder, chosen)
    print(f"raw embedder before the drain: {before:,.0f} sentences/s", flush=True)
    inside = [0.0, 0]
    embed = embedder.embed

    def timed(batch: Any) -> Any:
        started = time.perf_counter()
        out = embed(batch)
        inside[0] += time.perf_counter() - started
        inside[1] += len(batch)
        return out

    embedder.embed = timed  # type: ignore[method-assign,assignment]
    started = time.perf_counter()
    done = 0
    while (report := index_pending(runtime.log, embedder, limit=256)).embedded:
        done += report.embedded
        rate = done / (time.perf_counter() - started)
        print(f"\rindexing drain: {done:,} embedded, {rate:,.0f}/s", end="", flush=True)
    drain = done / max(time.perf_counter() - started, 1e-9)
    embedder.embed = embed  # type: ignore[method-assign]
    print(flush=True)
    after = _raw_rate(embedder, chosen)
    print(f"raw embedder after the drain: {after:,.0f} sentences/s", flush=True)
    return (before + after) / 2, inside[1] / inside[0], drain


def _recall_at_10(runtime: Runtime, caller: Caller, queries: list[str]) -> float:
    embedder = runtime.embedder
    vectors = embedder.embed(queries)
    hits = 0
    now = datetime.now(UTC)
    for vector in vectors:
        common: dict[str, Any] = {
            "vector": vector,
            "model_id": embedder.model_id,
            "dimension": embedder.dimension,
            "where": RecallQuery("", 10),
            "now": now,
        }
        approx = search(
            runtime.log, caller.tenant_id, exact=False, limit=10 * HNSW_OVERFETCH, **common
        )
        exact = search(runtime.log, caller.tenant_id, exact=True, limit=10, **common)
        top = {r["memory_id"] for r in sorted(approx, key=lambda r: -(r["similarity"] or 0.0))[:10]}
        hits += len(top & {r["memory_id"] for r in exact})
    return hits / (10 * len(vectors))


def forget_accesses(runtime: Runtime) -> None:
    """Delete every recorded access, and the buffer of this process's stamps first: its
    stamps not yet written would be written after the delete, and the totals of those it
    wrote lately would still count for each memory whose row reads fewer (for 30 s), so
    the last mode's reads would break the next mode's ties."""
    close_access_buffer(runtime.log)  # written, and gone: the next stamp starts a new one
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{runtime.database.schema}".memory_access')


def _questions_among(runtime: Runtime, caller: Caller) -> None:
    """Print recall@5/@10, per label and mode, of the knowledge-updates questions
    (``recall_hybrid.py``'s) whose answering statements' sentences are memories of
    this corpus, among all of it: a hit is any sentence of the answer in the top 5
    (10). Each mode starts with no accesses recorded (they rank: salience), so
    earlier reads and runs do not move it."""
    pairs = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]
    asked = answered_questions(pairs)
    now = datetime.now(UTC)
    print(
        "knowledge-updates questions among the corpus: label | questions | "
        + " | ".join(f"{mode} @5 / @10" for mode in MODES)
    )
    for label, answered in sorted(asked.items()):
        cells = []
        for mode in MODES:
            forget_accesses(runtime)
            at5 = at10 = 0
            for question, answer in answered:
                wanted = set(statement_sentences(answer))
                found = search_recall(
                    runtime.log,
                    runtime.embedder,
                    caller.tenant_id,
                    RecallQuery(question, 10, mode=mode),
                    now=now,
                )
                contents = [getattr(item, "content", None) for item in found.items]
                at5 += any(c in wanted for c in contents[:5])
                at10 += any(c in wanted for c in contents)
            cells.append(f"{at5 / len(answered):.3f} / {at10 / len(answered):.3f}")
        print(f"{label} | {len(answered)} | " + " | ".join(cells), flush=True)


def _server_latency(
    runtime: Runtime, token: str, queries: list[str], body: dict[str, Any]
) -> tuple[list[float], list[float], set[str]]:
    """Return server-side search ms, embedding ms, and the strategies used."""
    search_ms: list[float] = []
    embed_ms: list[float] = []
    strategies: set[str] = set()
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(ApiSettings(), runtime)) as client:
        for query in queries[:20]:  # warm-up
            client.post("/v1/recall", json={"query": query, **body}, headers=headers)
        for query in queries:
            response = client.post("/v1/recall", json={"query": query, **body}, headers=headers)
            assert response.status_code == 200, response.text
            timing = dict(re.findall(r"(\w+);dur=([\d.]+)", response.headers["Server-Timing"]))
            search_ms.append(float(timing["search"]))
            embed_ms.append(float(timing["embed"]))
            strategies.add(response.json()["strategy"])
            assert len(response.json()["items"]) == body.get("k", 10), "fewer than k"
    return search_ms, embed_ms, strategies


def _raw_latency(runtime: Runtime, vectors: list[list[float]], rare: bool) -> list[float]:
    """The same nearest-neighbour query through raw psycopg as the owner (no RLS)."""
    schema = runtime.database.schema
    out: list[float] = []
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("SET hnsw.ef_search = 100")
        for vector in vectors:
            literal = "[" + ",".join(map(repr, vector)) + "]"
            where = "WHERE dimension = 384" + (f" AND project = '{_RARE}'" if rare else "")
            order = "(embedding::vector(384) <=> %s::vector(384))" + (" + 0" if rare else "")
            started = time.perf_counter()
            conn.execute(
                f'SELECT memory_id FROM "{schema}".memory_embeddings {where}'
                f" ORDER BY {order} LIMIT 10",
                (literal,),
            ).fetchall()
            out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--sample", type=int, default=5_000, help="raw embedder sample size")
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="palimpsest-recall-"))
    fresh = args.data_dir is None or not (data_dir / "pgdata").exists()
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    from palimpsest.projections.commands.tokens import create_tenant

    words = list(dataset_sentences())
    corpus = (words + sentences(args.memories + args.queries, seed=11))[: args.memories]
    held_out = sentences(args.memories + args.queries, seed=11)[-args.queries :]
    if fresh:
        issued = create_tenant(runtime.log, "recall-bench")
        caller = authenticate(runtime.log, issued.token)
        _load(runtime, caller, corpus)
        raw, inside, drain = _embedding_throughput(runtime, corpus, args.sample)
        print(
            f"embedding: drain {drain:,.0f}/s; raw embedder {raw:,.0f}/s (ratio {drain / raw:.2f});"
            f" the embedder within the drain {inside:,.0f}/s (ratio {drain / inside:.2f})"
        )
        with runtime.database.owner_connection(autocommit=True) as conn:
            conn.execute("ANALYZE")  # what autovacuum would have done by now
        token = issued.token
    else:
        with runtime.database.owner_connection() as conn:
            row = conn.execute(
                f'SELECT tenant_id FROM "{runtime.database.schema}".memory_index LIMIT 1'
            ).fetchone()
        assert row is not None
        token = issue_token(runtime.log, row[0], "bench", "admin").token
        caller = authenticate(runtime.log, token)
        # An interrupted run's store: finish its drains before measuring.
        while drain_revisions(runtime.log).claimed:
            pass
        while (done := index_pending(runtime.log, runtime.embedder, limit=256)).embedded:
            print(f"\rresuming the indexing drain: {done.embedded} more", end="", flush=True)
        print(flush=True)
        with runtime.database.owner_connection(autocommit=True) as conn:
            conn.execute("ANALYZE")
    with runtime.database.owner_connection() as conn:
        count = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".memory_embeddings'
        ).fetchone()
    print(f"memories embedded: {count[0] if count else 0:,}")

    gc.freeze()  # as `palimpsest serve` does once started
    _questions_among(runtime, caller)
    recall = _recall_at_10(runtime, caller, held_out)
    print(f"recall@10 (HNSW as recall queries it vs exact): {recall:.3f}")
    vectors = runtime.embedder.embed(held_out)
    for label, body, rare in (
        ("no filter, hybrid (default)", {"k": 10}, False),
        ("no filter, vector", {"k": 10, "mode": "vector"}, False),
        ("no filter, text", {"k": 10, "mode": "text"}, False),
        ("selective filter (project, 1%), hybrid", {"k": 10, "project": _RARE}, True),
        (
            "selective filter (project, 1%), vector",
            {"k": 10, "project": _RARE, "mode": "vector"},
            True,
        ),
    ):
        search_ms, embed_ms, strategies = _server_latency(runtime, token, held_out, body)
        baseline = _raw_latency(runtime, vectors, rare)
        print(
            f"POST /v1/recall, {label}: search p50 {statistics.median(search_ms):.1f} ms,"
            f" p99 {_pct(search_ms, 0.99):.1f} ms (strategy {', '.join(sorted(strategies))});"
            f" query embedding p50 {statistics.median(embed_ms):.1f} ms;"
            f" raw psycopg baseline p50 {statistics.median(baseline):.1f} ms,"
            f" p99 {_pct(baseline, 0.99):.1f} ms"
        )
    runtime.close()
    print(f"data directory: {data_dir}")


if __name__ == "__main__":
    main()
