"""What an agent feels, beside its floors: issue 48's table, measured in one run.

Usage: python tests/benchmarks/agent_ops.py [--memories N] [--rounds R] [--ops N]
                                            [--mix-seconds S] [--no-recall] [--reads-only]
                                            [--mix-only] [--data-dir D]

One ``palimpsest serve --workers 1`` (its drains in their own process, the local
embedding model) over a tenant of ``--memories`` memories (loaded through the
library's writer in batches, drained and embedded before serving). One
keep-alive client runs each operation in a block, then its floor in a block,
``--rounds`` times (the machine's speed moves within minutes; alternated blocks
meet its fast and slow moments alike), each block once the drains have caught up
with the writes of the block before (published and embedded: a block that follows
150 creates or revisions would otherwise share the cores with their embedding), and
the run prints, per row, p50 and p99
of every round's operation and floor, the ratio of the p50s overall and its
spread over the rounds:

- read by id (``GET /v1/memories/{id}``) vs ``/healthz`` and a raw primary-key
  select (psycopg, the runtime role, one ``beliefs`` row);
- a batch of 20 (``GET /v1/memories/batch``) vs ``/healthz``;
- create (``POST /v1/memories``) vs ``/healthz`` + a raw insert (the append
  benchmark's raw rows of one memory);
- revise (``POST /v1/memories/{id}/versions``) vs the same;
- recall hybrid, k=10, each query a new text vs ``/healthz``; the server's own
  split (``Server-Timing``: the query's embedding, and the search step of hybrid
  and of vector recall with its two parts, the searches and the ranking), and the
  model embedding one query in this plain process as the embedding's floor;
- recall hybrid of a repeated query (its embedding remembered) vs text-mode recall
  of the same queries;
- 8 clients, 90% reads by id and 10% creates vs 8 clients on ``/healthz``
  (throughput, and the reads' p99), with the CPU each used, by process: the
  server, its children (the drain process), PostgreSQL and this client, which all
  share the machine's cores.

``--reads-only`` runs the two read rows (read by id and batch of 20, each against
``/healthz``) and nothing else: minutes less when working on reads. The memories are
still embedded and indexed, as before any full run's rows, unless ``--no-recall``
(then a read finds no current text in recall's text index, and reads it apart).
``--mix-only`` runs the 8 clients' rows and nothing else.

``--data-dir D`` keeps the store in ``D``; run again with the same ``D``, the
tenant an earlier run loaded (and embedded) is measured again, with what that run
wrote to it: loading and embedding 100,000 memories took 25 minutes here.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import (
    authenticate,
    create_tenant,
    issue_token,
    list_tenants,
)
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.recall.embedders import Embedder
from palimpsest.projections.recall.indexing import unindexed_count
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.revision_status import revision_totals
from tests.api.cli.serving import stop_serve
from tests.benchmarks.append import (
    drained,
    percentile,
    raw_insert,
    raw_setup,
    start_benchmark_serve,
)
from tests.benchmarks.lean_http import KeepAliveClient
from tests.benchmarks.sentences import sentences
from tests.conftest import drain_until_caught_up, index_until_caught_up, library_writer

Op = Callable[[int], object]
QUERIES = [
    "what does Alice prefer for breakfast",
    "when is the release",
    "which database did the team choose",
    "where does Bob live",
    "the deadline of the migration project",
    "who owns the billing service",
    "favourite programming language",
    "the office wifi password",
]


_ASKED = itertools.count()
"""Numbers every new query of the run, so no two are the same text."""


def _query(i: int, *, new: bool) -> str:
    """The ``i``-th query: one of :data:`QUERIES`, made a text never asked before in
    this run when ``new`` (a number the memories do not hold, so it matches the
    same), so the service cannot have remembered its embedding."""
    text = QUERIES[i % len(QUERIES)]
    return f"{text} (query {next(_ASKED)})" if new else text


_TENANT = "agent-ops"


def _load(runtime: Runtime, memories: int, recall: bool) -> tuple[str, uuid.UUID]:
    """A tenant of ``memories`` varied notes, drained (and embedded when ``recall``);
    its token and id."""
    issued = create_tenant(runtime.log, _TENANT)
    caller = authenticate(runtime.log, issued.token)
    writer = library_writer(runtime)
    texts = sentences(memories)
    started = time.perf_counter()
    for start in range(0, memories, 1000):
        specs = [
            MemorySpec("fact", "user", None, None, text, (), None, 1.0)
            for text in texts[start : start + 1000]
        ]
        writer.write(caller, specs, batch=True)
    print(f"loaded {memories:,} memories in {time.perf_counter() - started:.0f} s", flush=True)
    started = time.perf_counter()
    if recall:
        index_until_caught_up(runtime, issued.tenant_id)
    else:
        drain_until_caught_up(runtime)
    print(f"drained{' and embedded' if recall else ''} in {time.perf_counter() - started:.0f} s")
    return issued.token, issued.tenant_id


def _reused(runtime: Runtime, recall: bool) -> tuple[str, uuid.UUID] | None:
    """The tenant an earlier run loaded into this store, with a new token, caught up
    (embedded when ``recall``); None in a store of none."""
    loaded = [t.tenant_id for t in list_tenants(runtime.log) if t.name == _TENANT]
    if not loaded:
        return None
    token = issue_token(runtime.log, loaded[0], f"run-{uuid.uuid4().hex[:8]}", "admin").token
    if recall:
        index_until_caught_up(runtime, loaded[0])
    else:
        drain_until_caught_up(runtime)
    print(f"reusing the {len(_memory_ids(runtime, loaded[0])):,} memories of an earlier run")
    return token, loaded[0]


def _memory_ids(runtime: Runtime, tenant: uuid.UUID) -> list[uuid.UUID]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT memory_id FROM "{schema}".beliefs WHERE tenant_id = %s', (tenant,)
        ).fetchall()
    return [row[0] for row in rows]


def _block(op: Op, count: int, offset: int) -> list[float]:
    """Run ``op`` ``count`` times; return each call's milliseconds."""
    out = []
    for i in range(count):
        started = time.perf_counter()
        op(offset + i)
        out.append(1000 * (time.perf_counter() - started))
    return out


def _alternated(
    pairs: dict[str, tuple[Op, Op]], rounds: int, ops: int, settle: Callable[[], None]
) -> None:
    """For each row, ``rounds`` times: a block of the operation, then one of its floor
    (the order of the rows alternating), each after ``settle`` (the drains caught up:
    a block after one of writes ran beside their embedding, 150 versions' worth); print
    p50/p99 and the p50 ratio's spread."""
    took: dict[str, tuple[list[list[float]], list[list[float]]]] = {row: ([], []) for row in pairs}
    for r in range(rounds):
        for row in list(pairs) if r % 2 == 0 else list(reversed(pairs)):
            op, floor = pairs[row]
            settle()
            took[row][0].append(_block(op, ops, r * ops))
            settle()
            took[row][1].append(_block(floor, ops, r * ops))
        print(f"  round {r} done", flush=True)
    print(
        f"\n{'row':<34} {'op p50/p99 ms':>15} {'floor p50/p99 ms':>17}  ratio p50 (rounds)",
        flush=True,
    )
    for row, (op_rounds, floor_rounds) in took.items():
        every_op = [x for r in op_rounds for x in r]
        every_floor = [x for r in floor_rounds for x in r]
        ratios = [
            statistics.median(o) / statistics.median(f)
            for o, f in zip(op_rounds, floor_rounds, strict=True)
        ]
        print(
            f"{row:<34} {statistics.median(every_op):7.2f}/{percentile(every_op, 0.99):<7.2f}"
            f" {statistics.median(every_floor):8.3f}/{percentile(every_floor, 0.99):<8.3f}"
            f"  {statistics.median(every_op) / statistics.median(every_floor):5.2f}x"
            f" ({min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )


def _plain_embedder(runtime_name: str) -> Embedder:
    """The model in this plain process (no server), on the runtime the server uses
    (``local`` or ``local-onnx``), loaded and warm."""
    from palimpsest.projections.recall.settings import EmbeddingSettings

    embedder = EmbeddingSettings(embedder=runtime_name).make_embedder()
    embedder.embed(["warm up"])
    return embedder


def _clients(
    base: str, headers: dict[str, str], seconds: float, one: Callable[[KeepAliveClient, int], str]
) -> tuple[float, list[float]]:
    """8 client threads running ``one`` (which names the kind it ran) for ``seconds``;
    return operations a second and the reads' milliseconds."""
    reads: list[float] = []
    done = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(n: int) -> None:
        client = KeepAliveClient(base, headers)
        mine: list[float] = []
        count = 0
        try:
            while time.monotonic() < stop:
                started = time.perf_counter()
                kind = one(client, n * 1_000_000 + count)
                if kind == "read":
                    mine.append(1000 * (time.perf_counter() - started))
                count += 1
        finally:
            client.close()
            with lock:
                reads.extend(mine)
                done[0] += count

    threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0] / (time.perf_counter() - started), reads


def main() -> None:  # noqa: PLR0915 (a benchmark script reads best top to bottom)
    parser = argparse.ArgumentParser()
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--ops", type=int, default=200, help="operations per block")
    parser.add_argument("--mix-seconds", type=float, default=5.0)
    parser.add_argument("--no-recall", action="store_true", help="skip embedding and recall")
    parser.add_argument(
        "--reads-only", action="store_true", help="only read by id and batch of 20 vs /healthz"
    )
    parser.add_argument(
        "--mix-only", action="store_true", help="only 8 clients on the mix vs on /healthz"
    )
    parser.add_argument(
        "--embedder",
        choices=("local", "local-onnx"),
        default="local-onnx",  # what `palimpsest serve` runs with the onnx extra installed
        help="the local model's runtime, in the server and in the plain process",
    )
    parser.add_argument(
        "--data-dir", type=Path, help="keep the store here; reuse the tenant loaded in it"
    )
    args = parser.parse_args()
    embedded = not args.no_recall  # the memories' texts indexed, as recall leaves them
    # The server embeds what it is written (as a user's does) unless only reads run.
    embeds = embedded and not args.reads_only
    recall = embeds and not args.mix_only
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="pal-ops-"))
    print(f"store: {data_dir}", flush=True)
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    served = None
    clients: list[KeepAliveClient] = []
    raw: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        raw_setup(runtime)
        token, tenant_id = _reused(runtime, embedded) or _load(runtime, args.memories, embedded)
        ids = _memory_ids(runtime, tenant_id)
        schema, tenant = runtime.database.schema, str(tenant_id)
        conninfo = make_conninfo(
            "",
            **{
                **runtime.database.owner_conninfo(),
                "user": runtime.database.app_user,
                "password": runtime.database.app_password,
            },
        )
        raw = psycopg.connect(conninfo)
        settings = {"PALIMPSEST_DRAIN_PROCESS": "1"}
        if embeds:  # serve_env points the embedder nowhere; recall needs the model
            settings |= {"PALIMPSEST_EMBEDDER": args.embedder}
        served, base = start_benchmark_serve(runtime, 1, settings)
        drained(runtime)  # before the client connects: uvicorn closes a connection idle 5 s
        headers = {"Authorization": f"Bearer {token}"}
        client = KeepAliveClient(base, headers)
        clients.append(client)
        rng = random.Random(5)
        revised = ids[: args.ops * args.rounds]
        connection = raw

        def pk_select(i: int) -> object:
            with connection.transaction():
                connection.execute("SELECT set_config('palimpsest.tenant_id', %s, true)", (tenant,))
                return connection.execute(
                    f'SELECT belief FROM "{schema}".beliefs WHERE memory_id = %s',
                    (ids[i % len(ids)],),
                ).fetchone()

        def healthz(i: int) -> object:
            return client.request("GET", "/healthz")

        def healthz_and_insert(i: int) -> object:
            client.request("GET", "/healthz")
            raw_insert(connection, schema, tenant, 1)
            return None

        batch_query = [
            "&".join(f"ids={m}" for m in rng.sample(ids, min(20, len(ids)))) for _ in range(50)
        ]
        pairs: dict[str, tuple[Op, Op]] = {
            "read by id / healthz": (
                lambda i: client.json("GET", f"/v1/memories/{ids[rng.randrange(len(ids))]}"),
                healthz,
            ),
            "read by id / raw PK select": (
                lambda i: client.json("GET", f"/v1/memories/{ids[rng.randrange(len(ids))]}"),
                pk_select,
            ),
            "batch of 20 / healthz": (
                lambda i: client.json("GET", f"/v1/memories/batch?{batch_query[i % 50]}"),
                healthz,
            ),
            "create / healthz + raw insert": (
                lambda i: client.json(
                    "POST",
                    "/v1/memories",
                    {"type": "fact", "scope": "user", "content": f"new {i} {uuid.uuid4()}"},
                ),
                healthz_and_insert,
            ),
            "revise / healthz + raw insert": (
                lambda i: client.json(
                    "POST",
                    f"/v1/memories/{revised[i % len(revised)]}/versions",
                    {"content": f"revised {i} {uuid.uuid4()}"},
                ),
                healthz_and_insert,
            ),
        }
        if args.reads_only:
            pairs = {row: pairs[row] for row in ("read by id / healthz", "batch of 20 / healthz")}
        if args.mix_only:
            pairs = {}
        if recall:

            def recall_op(mode: str, new: bool) -> Op:
                # A new query each call (its embedding not remembered), or the eight
                # questions again and again, as an agent asks them.
                return lambda i: client.json(
                    "POST",
                    "/v1/recall",
                    {"query": _query(i, new=new), "k": 10, "mode": mode},
                )

            pairs["recall hybrid k=10 / healthz"] = (recall_op("hybrid", True), healthz)
            pairs["recall hybrid, repeated / text"] = (
                recall_op("hybrid", False),
                recall_op("text", False),
            )
        for op, floor in pairs.values():  # statements prepared, caches warm
            _block(op, 30, 10_000_000)
            _block(floor, 30, 10_000_000)
        if pairs:
            print(
                f"\nagent ops: {args.memories:,} memories, {args.rounds} rounds of {args.ops}"
                " a block, one keep-alive client, blocks alternated with their floors",
                flush=True,
            )
            indexed = tenant_id if embeds else None
            _alternated(
                pairs,
                args.rounds,
                args.ops,
                lambda: _at_rest(runtime, indexed, lambda: client.request("GET", "/healthz")),
            )
        if recall:
            _recall_timing(base, headers, args.ops, args.embedder, args.rounds)
        if not args.reads_only:
            _mix(
                runtime,
                tenant_id if embeds else None,
                base,
                headers,
                ids,
                args.mix_seconds,
                args.rounds,
                served.pid,
            )
    finally:
        for one in clients:
            one.close()
        if served is not None:
            stop_serve(served)
        if raw is not None:
            raw.close()
        runtime.close()


def _recall_timing(
    base: str, headers: dict[str, str], count: int, runtime_name: str, rounds: int
) -> None:
    """Print the server's split of a hybrid recall (``Server-Timing``) beside the model
    embedding one query in this plain process, in ``rounds`` alternated blocks (the
    machine's speed moves within minutes: a block of one after all of the other read
    1.47x on 2026-12-07, where the same code had read 0.98x).

    The plain process is measured twice: back to back, as before, and paced, each
    query after a pause as long as the server's recalls spent between two embeddings.
    A model asked back to back runs on warm caches and a busy core; after a pause the
    same call took 4.8 ms instead of 3.4 (onnxruntime, 2026-12-07), and right after a
    text-mode recall in the same process 5.9: most of what the server's embedding adds
    to the back-to-back figure is its pace, not the server."""
    import httpx2

    embed: list[float] = []
    plain: list[float] = []
    paced: list[float] = []
    search: dict[str, list[float]] = {"hybrid": [], "vector": []}
    parts: dict[str, dict[str, list[float]]] = {
        mode: {"index": [], "rank": []} for mode in ("hybrid", "vector")
    }
    embedder = _plain_embedder(runtime_name)
    per_round = max(1, count // rounds)
    with httpx2.Client(base_url=base, headers=headers) as client:
        for _ in range(rounds):
            gaps: list[float] = []
            for i in range(2 * per_round):  # hybrid and vector alternated, each query new
                mode = "hybrid" if i % 2 == 0 else "vector"
                started = time.perf_counter()
                response = client.post(
                    "/v1/recall", json={"query": _query(i, new=True), "k": 10, "mode": mode}
                )
                timing = dict(re.findall(r"(\w+);dur=([\d.]+)", response.headers["Server-Timing"]))
                embed.append(float(timing["embed"]))
                search[mode].append(float(timing["search"]))
                for part, took in parts[mode].items():
                    took.append(float(timing[part]))
                gaps.append(1000 * (time.perf_counter() - started) - embed[-1])
            plain += _block(lambda i: embedder.embed([_query(i, new=True)]), 2 * per_round, 0)
            pause = statistics.median(gaps) / 1000

            def after_pause(i: int, pause: float = pause) -> object:
                time.sleep(pause)
                started = time.perf_counter()
                embedder.embed([_query(i, new=True)])
                paced.append(1000 * (time.perf_counter() - started))
                return None

            _block(after_pause, 2 * per_round, 0)
    hybrid, vector = (statistics.median(search[m]) for m in ("hybrid", "vector"))
    split = {m: [statistics.median(parts[m][p]) for p in ("index", "rank")] for m in parts}
    server = statistics.median(embed)
    print(
        f"recall's split (server-timing): embedding p50 {server:.2f} ms"
        f" p99 {percentile(embed, 0.99):.2f} ms; the model in a plain process, back to back,"
        f" p50 {statistics.median(plain):.2f} ms p99 {percentile(plain, 0.99):.2f} ms"
        f" ({server / statistics.median(plain):.2f}x), paced as the server's recalls"
        f" p50 {statistics.median(paced):.2f} ms p99 {percentile(paced, 0.99):.2f} ms"
        f" ({server / statistics.median(paced):.2f}x; {rounds} alternated blocks);"
        f" search step p50 hybrid {hybrid:.2f} ms, vector {vector:.2f} ms"
        f" ({hybrid / vector:.2f}x); its parts p50, index (the searches) / rank: hybrid"
        f" {split['hybrid'][0]:.2f} / {split['hybrid'][1]:.2f} ms,"
        f" vector {split['vector'][0]:.2f} / {split['vector'][1]:.2f} ms",
        flush=True,
    )


def _cpu_seconds(server_pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds so far (user and system) of each process of the server, its children
    (the drain process, other workers), PostgreSQL and this benchmark (its client
    threads), by pid, with its group."""
    server = psutil.Process(server_pid)
    children = {child.pid for child in server.children(recursive=True)}
    found: dict[int, tuple[str, float]] = {}
    for process in psutil.process_iter(["pid", "name"]):
        pid = process.info["pid"]
        if pid == server_pid:
            group = "server"
        elif pid in children:
            group = "its children"
        elif process.info["name"] == "postgres":
            group = "PostgreSQL"
        elif pid == os.getpid():
            group = "this client"
        else:
            continue
        with contextlib.suppress(psutil.Error):  # ended meanwhile
            times = process.cpu_times()
            found[pid] = (group, times.user + times.system)
    return found


def _cpu_used(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
) -> dict[str, float]:
    """CPU seconds each group used between two :func:`_cpu_seconds` (a process started
    in between counts whole; one that ended in between is not seen)."""
    used = dict.fromkeys(("server", "its children", "PostgreSQL", "this client"), 0.0)
    for pid, (group, total) in after.items():
        used[group] += total - before.get(pid, (group, 0.0))[1]
    return used


def _at_rest(
    runtime: Runtime,
    indexed: uuid.UUID | None,
    ping: Callable[[], object] = lambda: None,
    timeout_s: float = 300.0,
) -> None:
    """Wait until the served drains have published every write and, when the server
    embeds (``indexed``: the tenant whose writes it indexes), indexed it; ``ping``
    meanwhile (a keep-alive connection that waits idle 5 s is closed by uvicorn)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if revision_totals(runtime.log)["dirty_memories"] == 0 and not (
            indexed and unindexed_count(runtime.log, indexed)
        ):
            return
        ping()
        time.sleep(0.2)
    print(f"  (drains still behind after {timeout_s:.0f} s)", flush=True)


def _mix(
    runtime: Runtime,
    indexed: uuid.UUID | None,
    base: str,
    headers: dict[str, str],
    ids: list[uuid.UUID],
    seconds: float,
    rounds: int,
    server_pid: int,
) -> None:
    """8 clients on the 90/10 mix, alternated with 8 clients on ``/healthz``; and where
    the machine's CPU went during each (cores used, by process).

    Each block starts with the drains caught up: the mix's writes leave the drain
    process embedding them for seconds after, and a floor measured meanwhile shared
    the cores with it (2026-12-07: the drain process used 0.49 cores during the
    ``/healthz`` block that followed a mix)."""

    def mixed(client: KeepAliveClient, i: int) -> str:
        if i % 10 == 9:
            client.json(
                "POST",
                "/v1/memories",
                {"type": "fact", "scope": "user", "content": f"mix {i} {uuid.uuid4()}"},
            )
            return "write"
        client.json("GET", f"/v1/memories/{ids[(i * 7919) % len(ids)]}")
        return "read"

    def health(client: KeepAliveClient, i: int) -> str:
        client.request("GET", "/healthz")
        return "health"

    mix_rates: list[float] = []
    health_rates: list[float] = []
    read_ms: list[float] = []
    used: dict[str, dict[str, float]] = {"mix": {}, "healthz": {}}
    spent = dict.fromkeys(used, 0.0)

    def measured(
        kind: str, one: Callable[[KeepAliveClient, int], str]
    ) -> tuple[float, list[float]]:
        _at_rest(runtime, indexed)  # no backlog left by the block before
        before, started = _cpu_seconds(server_pid), time.perf_counter()
        rate, reads = _clients(base, headers, seconds, one)
        spent[kind] += time.perf_counter() - started
        for group, cpu in _cpu_used(before, _cpu_seconds(server_pid)).items():
            used[kind][group] = used[kind].get(group, 0.0) + cpu
        return rate, reads

    for _ in range(max(2, rounds // 2)):
        rate, reads = measured("mix", mixed)
        mix_rates.append(rate)
        read_ms.extend(reads)
        health_rates.append(measured("healthz", health)[0])
    ratios = [m / h for m, h in zip(mix_rates, health_rates, strict=True)]
    print(
        f"8 clients 90/10: {statistics.median(mix_rates):,.0f} ops/s (read p50"
        f" {statistics.median(read_ms):.2f} ms, p99 {percentile(read_ms, 0.99):.1f} ms);"
        f" 8 clients on /healthz {statistics.median(health_rates):,.0f} req/s;"
        f" {statistics.median(mix_rates) / statistics.median(health_rates):.2f}x"
        f" ({min(ratios):.2f}-{max(ratios):.2f})",
        flush=True,
    )
    for kind, groups in used.items():
        cores = ", ".join(f"{group} {cpu / spent[kind]:.2f}" for group, cpu in groups.items())
        print(f"  CPU cores used during {kind} (of {os.cpu_count()}): {cores}", flush=True)


if __name__ == "__main__":
    main()
