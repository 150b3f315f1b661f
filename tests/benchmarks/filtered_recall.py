"""Filtered recall at scale: a LangGraph store of many users, each user's search at limit 5.

Usage: python tests/benchmarks/filtered_recall.py [--users 1000] [--per-user 20]
                                                  [--probes 200] [--data-dir D]

A fresh embedded PostgreSQL (or ``--data-dir`` of an earlier run, which skips
loading), one tenant, the real local embedding model. Each user has ``--per-user``
memories in the LangGraph layout (namespace ``("memories", user)``: scope
``memories``, project the user, topic the key, content the value as JSON), written
through the write path: one relevant memory (a fact about "the user", one of ten
kinds, so a tenth of all users hold a memory of the same kind, worded alike) and
real sentences about other people (tests/benchmarks/sentences.py). Then, for
``--probes`` users drawn at random, the question its relevant memory answers:

- through the real LangGraph store, over the real HTTP API of a ``palimpsest serve``
  process on the same database, then of the app served in this process (uvicorn on
  loopback): ``store.search(("memories", user), query=..., limit=5)``; found = the
  user's relevant memory among the five; latency p50/p99 of the whole call (HTTP,
  the query's embedding, search, ranking, access stamps), in alternated blocks:
  every query embedded (the service's remembered query vectors cleared before each
  call, outside its time), then the questions as asked (ten questions, so the
  service embeds each once);
- the recall function in process, same filters (scope, ``project_under``): its
  query embedding and its search step apart, p50/p99, and the strategy it used;
- the raw query baseline: the same filtered nearest-neighbour query through raw
  psycopg as the owner (no row-level security, no ranking, the vector given);
- what the store did before (issue 44): recall of ``4 x limit`` in the scope, the
  user's memories kept after: how many probes found the relevant memory.

The store is alone on the server. In the second set of blocks the client and the
server share this process's interpreter (the figure includes that contention). It
measures and prints; it asserts nothing.
docs/benchmarks.md holds the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.client import Client
from palimpsest.api.client.langgraph_store import PalimpsestStore
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, create_tenant, issue_token
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.recall.query_vectors import query_vectors
from palimpsest.projections.recall.search import RecallQuery, recall
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.api.cli.serving import stop_serve
from tests.api.live_server import live_server
from tests.benchmarks.append import start_benchmark_serve
from tests.benchmarks.sentences import sentences

SCOPE = "memories"
RELEVANT_KEY = "fact"

_KINDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "The user's favourite colour is {}.",
        "What is the user's favourite colour?",
        ("teal", "crimson", "ochre", "violet", "olive"),
    ),
    (
        "The user is allergic to {}.",
        "What food is the user allergic to?",
        ("peanuts", "shellfish", "sesame", "kiwi", "eggs"),
    ),
    (
        "The user's dog is called {}.",
        "What is the name of the user's dog?",
        ("Biscuit", "Pepper", "Juno", "Mochi", "Rex"),
    ),
    (
        "The user works as a {}.",
        "What is the user's job?",
        ("nurse", "carpenter", "pilot", "librarian", "chemist"),
    ),
    (
        "The user lives in {}.",
        "Which city does the user live in?",
        ("Porto", "Leeds", "Osaka", "Quito", "Tallinn"),
    ),
    (
        "The user's birthday is on the {}th of March.",
        "When is the user's birthday?",
        ("4", "11", "17", "23", "28"),
    ),
    (
        "The user drinks {} every morning.",
        "What does the user drink in the morning?",
        ("green tea", "espresso", "oat milk", "matcha", "orange juice"),
    ),
    (
        "The user writes code in {} as an editor.",
        "Which code editor does the user prefer?",
        ("Vim", "Emacs", "VS Code", "Helix", "Zed"),
    ),
    (
        "The user's partner is named {}.",
        "What is the name of the user's partner?",
        ("Ana", "Tomás", "Keiko", "Olu", "Marta"),
    ),
    (
        "The user plays {} at the weekend.",
        "Which sport does the user play at the weekend?",
        ("tennis", "rugby", "badminton", "water polo", "squash"),
    ),
)
"""Ten kinds of fact about "the user": its text, the question it answers, details."""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _user(n: int) -> str:
    return f"user-{n:05d}"


def _relevant(n: int) -> tuple[str, str]:
    """User ``n``'s relevant memory and the question it answers."""
    text, question, details = _KINDS[n % len(_KINDS)]
    return text.format(details[(n // len(_KINDS)) % len(details)]), question


def _load(runtime: Runtime, caller: Caller, users: int, per_user: int) -> None:
    """Write every user's memories as the LangGraph store writes them, then drain
    revisions and index (embed) them all."""
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=24)),
        lambda: datetime.now(UTC),
    )
    others = sentences(users * (per_user - 1), seed=23)
    started = time.perf_counter()
    specs: list[MemorySpec] = []
    for n in range(users):
        values = [(RELEVANT_KEY, _relevant(n)[0])] + [
            (f"note-{j}", others[n * (per_user - 1) + j]) for j in range(per_user - 1)
        ]
        for key, text in values:
            content = json.dumps({"text": text}, sort_keys=True)
            specs.append(MemorySpec("note", SCOPE, _user(n), key, content, (), None, 1.0))
        if len(specs) >= 1000 or n == users - 1:
            writer.write(caller, specs, batch=True)
            specs = []
            print(f"\rloading: {n + 1:,}/{users:,} users", end="", flush=True)
    print(f"\nloaded in {time.perf_counter() - started:.0f} s", flush=True)
    _drain(runtime)


def _drain(runtime: Runtime) -> None:
    started = time.perf_counter()
    while drain_revisions(runtime.log, limit=2000).claimed:
        pass
    done = 0
    while (report := index_pending(runtime.log, runtime.embedder, limit=256)).embedded:
        done += report.embedded
        print(f"\rindexed: {done:,}", end="", flush=True)
    print(f"\ndrained and indexed in {time.perf_counter() - started:.0f} s", flush=True)
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("ANALYZE")  # what autovacuum would have done by now


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    answer = call()
    return answer, (time.perf_counter() - started) * 1000


def _through_the_store(
    base: str, token: str, probes: list[int], forget: Callable[[], None] | None = None
) -> tuple[int, list[float]]:
    """Probes through the LangGraph store over HTTP: found, and each call's ms.
    ``forget``, when given, runs before each probe (outside its time): the server's
    remembered query vectors are cleared, so every call embeds its query."""
    found = 0
    ms: list[float] = []
    with Client(base, token=token) as client:
        store = PalimpsestStore(client)
        for warm, n in enumerate(probes[:20] + probes):
            if forget is not None:
                forget()
            items, took = _timed(
                lambda: store.search((SCOPE, _user(n)), query=_relevant(n)[1], limit=5)  # noqa: B023
            )
            if warm < 20:
                continue
            ms.append(took)
            found += any(i.key == RELEVANT_KEY for i in items)
    return found, ms


def _in_process(
    runtime: Runtime, caller: Caller, probes: list[int]
) -> tuple[int, list[float], list[float], set[str]]:
    """Probes through the recall function: found, embedding ms, search ms, strategies."""
    found = 0
    embed_ms: list[float] = []
    search_ms: list[float] = []
    strategies: set[str] = set()
    vectors = query_vectors(runtime.embedder)
    for warm, n in enumerate(probes[:20] + probes):
        vectors.clear()  # the query's embedding is measured, not remembered
        query = RecallQuery(_relevant(n)[1], 5, scope=SCOPE, project_under=_user(n))
        result = recall(
            runtime.log, runtime.embedder, caller.tenant_id, query, now=datetime.now(UTC)
        )
        if warm < 20:
            continue
        embed_ms.append(result.embed_ms)
        search_ms.append(result.search_ms)
        strategies.add(result.strategy)
        found += any(i.topic == RELEVANT_KEY for i in result.items)
    return found, embed_ms, search_ms, strategies


def _before(runtime: Runtime, caller: Caller, probes: list[int]) -> int:
    """What the store did before: recall ``4 x limit`` in the scope, then the user's."""
    found = 0
    for n in probes:
        query = RecallQuery(_relevant(n)[1], 20, scope=SCOPE)
        result = recall(
            runtime.log, runtime.embedder, caller.tenant_id, query, now=datetime.now(UTC)
        )
        mine = [i for i in result.items if i.project == _user(n)][:5]
        found += any(i.topic == RELEVANT_KEY for i in mine)
    return found


def _raw(runtime: Runtime, caller: Caller, probes: list[int]) -> tuple[int, list[float]]:
    """The same filtered nearest-neighbour query through raw psycopg as the owner, the
    query vectors embedded beforehand: found, and each query's ms."""
    schema = runtime.database.schema
    model = runtime.embedder.model_id
    dimension = runtime.embedder.dimension
    vectors = runtime.embedder.embed([_relevant(n)[1] for n in probes])
    statement = (
        f'SELECT memory_id, project FROM "{schema}".memory_embeddings e'
        f" WHERE tenant_id = %s AND model_id = %s AND dimension = {dimension}"
        " AND scope = %s AND project ~>=~ %s AND project ~<~ %s"
        " AND (project = %s OR starts_with(project, %s))"
        f" ORDER BY (embedding::vector({dimension}) <=> %s::vector({dimension})) + 0 LIMIT 5"
    )
    with runtime.database.owner_connection(autocommit=True) as conn:
        relevant = {
            row[0]
            for row in conn.execute(
                f'SELECT memory_id FROM "{schema}".memory_index WHERE topic = %s',
                (RELEVANT_KEY,),
            )
        }
        found = 0
        ms: list[float] = []
        for warm, (n, vector) in enumerate(
            list(zip(probes[:20], vectors[:20], strict=True))
            + list(zip(probes, vectors, strict=True))
        ):
            user = _user(n)
            literal = "[" + ",".join(map(repr, vector)) + "]"
            params = (caller.tenant_id, model, SCOPE, user, user + "0", user, user + "/", literal)
            rows, took = _timed(lambda: conn.execute(statement, params).fetchall())  # noqa: B023
            if warm < 20:
                continue
            ms.append(took)
            found += any(row[0] in relevant for row in rows)
    return found, ms


def _evict(base: str, token: str) -> None:
    """Clear the service's remembered query vectors (the tenant's caches)."""
    with Client(base, token=token) as client:
        client.evict_cache()


def _blocks(
    where: str, base: str, token: str, probes: list[int], forget: Callable[[], None]
) -> None:
    """Alternated blocks through the store: each query embedded on every call (the
    remembered query vectors cleared before it), then as an agent asks (ten
    questions, repeated)."""
    for block in range(2):
        found, ms = _through_the_store(base, token, probes, forget=forget)
        print(
            f"LangGraph store search over HTTP ({where}), every query embedded "
            f"(block {block + 1}): {found}/{len(probes)} found; "
            + _line("the whole call, query embedding included,", ms),
            flush=True,
        )
        found, ms = _through_the_store(base, token, probes)
        print(
            f"LangGraph store search over HTTP ({where}), repeated questions "
            f"(block {block + 1}): {found}/{len(probes)} found; " + _line("the whole call", ms),
            flush=True,
        )


def _line(label: str, ms: list[float]) -> str:
    return f"{label} p50 {statistics.median(ms):.1f} ms, p99 {_pct(ms, 0.99):.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--per-user", type=int, default=20)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--data-dir", type=Path)
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="palimpsest-filtered-"))
    fresh = args.data_dir is None or not (data_dir / "pgdata").exists()
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    runtime.load_embedder()
    if fresh:
        token = create_tenant(runtime.log, "filtered-bench").token
        caller = authenticate(runtime.log, token)
        _load(runtime, caller, args.users, args.per_user)
    else:
        with runtime.database.owner_connection() as conn:
            row = conn.execute(
                f'SELECT tenant_id FROM "{runtime.database.schema}".memory_index LIMIT 1'
            ).fetchone()
        assert row is not None
        token = issue_token(runtime.log, row[0], "bench", "admin").token
        caller = authenticate(runtime.log, token)
        _drain(runtime)
    with runtime.database.owner_connection() as conn:
        count = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".memory_embeddings'
        ).fetchone()
    print(f"memories embedded: {count[0] if count else 0:,} ({args.users:,} users)")
    probes = random.Random(29).sample(range(args.users), min(args.probes, args.users))
    gc.freeze()  # as `palimpsest serve` does once started

    before = _before(runtime, caller, probes)
    print(f"before (recall 4 x limit in the scope, then the user's): {before}/{len(probes)} found")
    found, embed_ms, search_ms, strategies = _in_process(runtime, caller, probes)
    print(
        f"recall in process: {found}/{len(probes)} found; "
        + _line("query embedding", embed_ms)
        + "; "
        + _line("search step", search_ms)
        + "; "
        + _line("both", [a + b for a, b in zip(embed_ms, search_ms, strict=True)])
        + f" (strategy {', '.join(sorted(strategies))})"
    )
    # The service in a process of its own, as `palimpsest serve` runs beside an agent;
    # then in this process (client and server sharing one interpreter).
    served, base = start_benchmark_serve(
        runtime, 1, {"PALIMPSEST_EMBEDDER": "local", "PALIMPSEST_DRAIN_PROCESS": "1"}
    )
    try:
        _blocks("palimpsest serve", base, token, probes, lambda: _evict(base, token))
    finally:
        stop_serve(served)
    vectors = query_vectors(runtime.embedder)
    with live_server(create_app(ApiSettings(), runtime)) as base:
        _blocks("in this process", base, token, probes, vectors.clear)
    found, ms = _raw(runtime, caller, probes)
    print(
        f"raw psycopg baseline (the same filtered query, vector given): "
        f"{found}/{len(probes)} found; " + _line("", ms)
    )
    runtime.close()
    print(f"data directory: {data_dir}")


if __name__ == "__main__":
    main()
