"""Append throughput: the library write path, HTTP, and raw psycopg, in one run.

Usage: python tests/benchmarks/append.py [--singles N] [--batches N] [--load-seconds S]
              [--analyze]
       python tests/benchmarks/append.py --load-only [--writers W] [--readers R]
              [--serve-workers N] [--serve-env NAME=VALUE ...]

Starts a fresh embedded PostgreSQL in a temporary directory (or uses
DATABASE_URL), then measures, each beside the same rows through raw psycopg
in the same transaction sizes:

- single writes (one memory = MemoryCreated + VersionRecorded + one payload
  row per transaction) through the library path (``Writer.write``) at 1 and 8
  concurrent clients (8: through the group commit), with p50/p99 latency;
- batches of 100 memories (200 events, 100 payload rows per transaction);
- against real ``palimpsest serve --workers 1`` and ``--workers 2`` processes on
  the same database (drains elected in one), and ``--workers 1`` with the drains
  in a process of their own (``PALIMPSEST_DRAIN_PROCESS=1``): HTTP single writes
  from 1 and 8 clients and batches of 100 (with 1 client through httpx too, for what a
  full-featured client costs; and 1 client's writes again, alternating in blocks of
  50 with raw single writes from the same thread, whose ratio the machine's drift
  within a run does not move), all through :class:`KeepAliveClient`, so that
  the benchmark's own client does not bound what it measures, each beside raw
  baselines measured again just before that process's figures;
- a concurrent load on each: 4 writers revising 20 ``fact`` memories and 4
  readers reading them, counting writes/s and stale ``current`` reads (a read
  that answers ``current`` with a version older than one whose write was
  acknowledged before the read began).

``--analyze`` runs ``ANALYZE`` on every table before each served configuration,
as pgbench vacuums before it measures: the figures of a store with statistics.
Without it, the served figures come from a store's first two minutes, when
autovacuum may not yet have analysed it (docs/benchmarks.md, 2026-12-05).

``--load-only`` runs only the concurrent load, against ``serve --workers 1`` (or
``--serve-workers N``), with ``--writers`` and ``--readers`` of its own and
``--serve-env`` settings for
the serving process (``PALIMPSEST_CANDIDATE_BUDGET_MS=0``, say): how the load
was taken apart in docs/benchmarks.md. A whole run passes ``--serve-env`` to
every served configuration (``PALIMPSEST_CANDIDATE_BUDGET_MS=0``, say).

The library path and HTTP writes commit through the group commit (concurrent
writes of one process share a transaction); the mean group size is printed.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.revision_status import revision_totals
from tests.api.cli.serving import free_port, serve_env, stop_serve
from tests.benchmarks.lean_http import KeepAliveClient
from tests.conftest import library_writer

EVENTS_PER_MEMORY = 2
QUIET = {"PALIMPSEST_LOG_LEVEL": "WARNING"}
"""The setting every process the benchmarks serve from runs with."""
STATE = json.dumps(
    {
        "tenant_id": str(uuid.uuid4()),
        "memory_type": "note",
        "scope": "bench",
        "project": None,
        "topic": None,
        "principal_id": str(uuid.uuid4()),
        "originator_topic": "palimpsest:Memory",
        "timestamp": datetime.now(UTC).isoformat(),
    }
).encode()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(
    name: str,
    events: int,
    seconds: float,
    latencies: list[float] | None,
    baseline: float | None,
    again: float | None = None,
) -> None:
    """Print one figure: its rate, p50 and p99, and its ratio to the raw ``baseline``
    (and to the raw baseline measured ``again`` just before it, if any)."""
    rate = events / seconds
    line = f"{name:<42} {rate:>10,.0f} events/s"
    if latencies:
        p50, p99 = 1000 * statistics.median(latencies), 1000 * percentile(latencies, 0.99)
        line += f"   p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
    if baseline:
        line += f"   = {rate / baseline:4.2f}x raw"
    if again:
        line += f" ({rate / again:4.2f}x the raw just before)"
    print(line, flush=True)


def raw_setup(runtime: Runtime) -> None:
    """Make baseline tables of the same shape as the real ones: columns, defaults,
    indexes and forced row-level security, written by the same runtime role."""
    schema, app = runtime.database.schema, runtime.database.app_user
    with runtime.database.owner_connection() as conn:
        for name, source in (
            ("bench_events", EVENTS_TABLE),
            ("bench_payloads", "payloads"),
            ("bench_revisions", "revisions"),
            ("bench_memory_index", "memory_index"),
        ):
            conn.execute(f'DROP TABLE IF EXISTS "{schema}".{name}')
            conn.execute(
                f'CREATE TABLE "{schema}".{name} (LIKE "{schema}"."{source}" INCLUDING ALL)'
            )
            conn.execute(f'ALTER TABLE "{schema}".{name} ENABLE ROW LEVEL SECURITY')
            conn.execute(f'ALTER TABLE "{schema}".{name} FORCE ROW LEVEL SECURITY')
            for verb, clause in (("SELECT", "USING"), ("INSERT", "WITH CHECK")):
                conn.execute(
                    f'CREATE POLICY p_{verb.lower()} ON "{schema}".{name} FOR {verb} '
                    f'{clause} (tenant_id = "{schema}".current_tenant())'
                )
            conn.execute(f'GRANT SELECT, INSERT, UPDATE ON "{schema}".{name} TO "{app}"')


def raw_insert(
    conn: psycopg.Connection[tuple[object, ...]], schema: str, tenant: str, memories: int
) -> None:
    """The rows of ``memories`` memory creations, in one transaction, as the runtime role:
    payloads, events, and each new memory's requested revision and index row."""
    with conn.transaction():
        conn.execute("SELECT set_config('palimpsest.tenant_id', %s, true)", (tenant,))
        ids = [uuid.uuid4() for _ in range(memories)]
        conn.execute(
            f'INSERT INTO "{schema}".bench_payloads (digest, content, size_bytes)'
            " SELECT d, c, octet_length(c) FROM unnest(%b::text[], %b::bytea[]) AS p(d, c)"
            " ON CONFLICT DO NOTHING",
            ([uuid.uuid4().hex for _ in ids], [b"note content " + i.bytes for i in ids]),
        )
        positions = conn.execute(
            f'INSERT INTO "{schema}".bench_events (originator_id, originator_version, topic, state)'
            " SELECT * FROM unnest(%b::uuid[], %b::bigint[], %b::text[], %b::bytea[])"
            " RETURNING notification_id",
            (
                [i for i in ids for _ in range(2)],
                [1, 2] * memories,
                ["palimpsest:MemoryCreated", "palimpsest:VersionRecorded"] * memories,
                [STATE] * (2 * memories),
            ),
        ).fetchall()
        conn.execute(
            f'INSERT INTO "{schema}".bench_revisions (memory_id, requested)'
            " SELECT unnest(%b::uuid[]), %b",
            (ids, max(int(str(row[0])) for row in positions)),
        )
        conn.execute(
            f'INSERT INTO "{schema}".bench_memory_index (memory_id, memory_type, scope, position)'
            " SELECT unnest(%b::uuid[]), 'note', 'bench', %b",
            (ids, max(int(str(row[0])) for row in positions)),
        )


def _timed(count: int, clients: int, one: Callable[[int], object]) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        started = time.perf_counter()
        one(i)
        elapsed = time.perf_counter() - started
        with lock:
            latencies.append(elapsed)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(run, range(count)))
    return time.perf_counter() - started, latencies


_SERVED: list[tuple[str, int, dict[str, str]]] = [
    ("serve --workers 1", 1, {}),
    ("serve --workers 2", 2, {}),
    ("serve --workers 1, drain process", 1, {"PALIMPSEST_DRAIN_PROCESS": "1"}),
]
"""The served configurations measured, in order: label, HTTP processes, settings."""


def start_benchmark_serve(
    runtime: Runtime, workers: int, settings: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``palimpsest serve --workers N`` on the benchmark's database; return it and
    its base URL once healthy. Its embedder points nowhere (:func:`serve_env`:
    indexing would compete for the two cores with the writes measured; the drains'
    revision stage runs)."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "palimpsest.api.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=serve_env(runtime, QUIET | (settings or {})),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                time.sleep(2)  # every worker up, not only the first
                return process, base
        except httpx2.TransportError:
            time.sleep(0.3)
    os.killpg(process.pid, signal.SIGKILL)
    msg = f"serve --workers {workers} did not start"
    raise RuntimeError(msg)


def _concurrent_load(
    base: str, headers: dict[str, str], seconds: float, writers: int = 4, readers: int = 4
) -> str:
    """``writers`` revise 20 facts, ``readers`` read them, for ``seconds``; return the
    line to print: writes/s, reads/s, and stale ``current`` reads."""
    lock = threading.Lock()
    position_of: dict[str, int] = {}  # version id -> its write's log position
    client = KeepAliveClient(base, headers)
    created = [
        client.json(
            "POST", "/v1/memories", {"type": "fact", "scope": "load", "content": f"fact {i} v0"}
        )
        for i in range(20)
    ]
    client.close()
    ids = [c["id"] for c in created]
    position_of |= {c["version_id"]: c["position"] for c in created}
    latest: dict[str, int] = {c["id"]: c["position"] for c in created}  # acknowledged
    counts = {"writes": 0, "reads": 0, "current": 0}
    # (version read as current, the newest position acknowledged before the read
    # began); checked once every write has been recorded.
    seen: list[tuple[str, int]] = []
    stop = time.monotonic() + seconds

    def writer(n: int) -> None:
        client = KeepAliveClient(base, headers)
        i = 0
        while time.monotonic() < stop:
            memory = random.choice(ids)
            body = client.json(
                "POST",
                f"/v1/memories/{memory}/versions",
                {"content": f"fact by writer {n}, revision {i}"},
            )
            i += 1
            with lock:
                position_of[body["version_id"]] = body["position"]
                latest[memory] = max(latest[memory], body["position"])
                counts["writes"] += 1
        client.close()

    def reader() -> None:
        client = KeepAliveClient(base, headers)
        while time.monotonic() < stop:
            memory = random.choice(ids)
            with lock:
                floor = latest[memory]
            answer = client.json("GET", f"/v1/memories/{memory}")
            with lock:
                counts["reads"] += 1
                if answer.get("status") == "current":
                    counts["current"] += 1
                    seen.append((answer["belief"]["current_version_id"], floor))
        client.close()

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(writers)]
    threads += [threading.Thread(target=reader) for _ in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stale = sum(1 for version, floor in seen if position_of[version] < floor)
    return (
        f"{counts['writes'] / seconds:,.0f} writes/s, {counts['reads'] / seconds:,.0f} reads/s"
        f" ({counts['current']} current, {counts['reads'] - counts['current']} pending),"
        f" stale current reads {stale}"
    )


def _setting(item: str) -> tuple[str, str]:
    """Parse ``--serve-env NAME=VALUE``."""
    name, sep, value = item.partition("=")
    if not sep or not name:
        msg = f"expected NAME=VALUE, got {item!r}"
        raise argparse.ArgumentTypeError(msg)
    return name, value


def _load_only(runtime: Runtime, args: argparse.Namespace) -> None:
    """Run only the concurrent load, against ``serve --workers N`` with the settings
    asked for."""
    settings = dict(args.serve_env)
    process, base = start_benchmark_serve(runtime, args.serve_workers, settings)
    try:
        loaded = create_tenant(runtime.log, "load")
        headers = {"Authorization": f"Bearer {loaded.token}"}
        line = _concurrent_load(base, headers, args.load_seconds, args.writers, args.readers)
        print(
            f"concurrent load, {args.writers} writers, {args.readers} readers,"
            f" serve --workers {args.serve_workers}"
            f" {' '.join(f'{k}={v}' for k, v in args.serve_env)}: {line}",
            flush=True,
        )
    finally:
        stop_serve(process)
        runtime.close()


def main() -> None:  # noqa: PLR0915 (a benchmark script reads best top to bottom)
    parser = argparse.ArgumentParser()
    parser.add_argument("--singles", type=int, default=1500)
    parser.add_argument("--batches", type=int, default=60)
    parser.add_argument("--load-seconds", type=float, default=10.0)
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument(
        "--analyze",
        action="store_true",
        help="ANALYZE every table before each served configuration (as pgbench vacuums"
        " first): a store with statistics, not a fresh one's first minutes",
    )
    parser.add_argument("--writers", type=int, default=4, help="with --load-only")
    parser.add_argument("--readers", type=int, default=4, help="with --load-only")
    parser.add_argument("--serve-workers", type=int, default=1, help="with --load-only")
    parser.add_argument(
        "--serve-env",
        action="append",
        default=[],
        type=_setting,
        metavar="NAME=VALUE",
        help="a setting of every serving process measured",
    )
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="palimpsest-bench-"))
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    if args.load_only:
        _load_only(runtime, args)
        return
    raw_setup(runtime)
    issued = create_tenant(runtime.log, "bench")
    caller = authenticate(runtime.log, issued.token)
    writer = library_writer(runtime)

    def spec(i: int) -> MemorySpec:
        return MemorySpec("note", "bench", None, None, f"note {i} {uuid.uuid4()}", (), None, 1.0)

    gc.freeze()  # as `palimpsest serve` does once started
    headers = {"Authorization": f"Bearer {issued.token}"}
    schema, tenant = runtime.database.schema, str(issued.tenant_id)
    local = threading.local()
    raw_conns: list[psycopg.Connection[tuple[object, ...]]] = []

    def raw_conn() -> psycopg.Connection[tuple[object, ...]]:
        if not hasattr(local, "raw"):
            local.raw = psycopg.connect(
                make_conninfo(
                    "",
                    **{
                        **runtime.database.owner_conninfo(),
                        "user": runtime.database.app_user,
                        "password": runtime.database.app_password,
                    },
                )
            )
            raw_conns.append(local.raw)
        return local.raw  # type: ignore[no-any-return]

    print(
        f"append benchmark: {args.singles} single writes, {args.batches} batches of 100; "
        f"PostgreSQL at {runtime.database.host}",
        flush=True,
    )
    raw_rates: dict[int, float] = {}
    for clients in (1, 8):
        n = args.singles if clients == 1 else args.singles * 2
        raw_s, raw_lat = _timed(n, clients, lambda i: raw_insert(raw_conn(), schema, tenant, 1))
        raw_rates[clients] = n * EVENTS_PER_MEMORY / raw_s
        _report(f"raw psycopg, 1 memory/tx, {clients} client(s)", n * 2, raw_s, raw_lat, None)
        runtime.log.group.sizes.clear()
        lib_s, lib_lat = _timed(
            n, clients, lambda i: writer.write(caller, [spec(i)], batch=False) and None
        )
        _report(
            f"library path, 1 memory/tx, {clients} client(s)",
            n * 2,
            lib_s,
            lib_lat,
            raw_rates[clients],
        )
        sizes = list(runtime.log.group.sizes)
        print(
            f"  group commit: {n - sum(sizes) + len(sizes)} transactions for {n} writes"
            f" (groups of 2+: {len(sizes)}, mean {statistics.mean(sizes) if sizes else 0:.1f})",
            flush=True,
        )

    b = args.batches
    raw_s, raw_lat = _timed(b, 1, lambda i: raw_insert(raw_conn(), schema, tenant, 100))
    raw_batch_rate = b * 200 / raw_s
    _report("raw psycopg, 100 memories/tx", b * 200, raw_s, raw_lat, None)
    lib_s, lib_lat = _timed(
        b,
        1,
        lambda i: (
            writer.write(caller, [spec(i * 100 + j) for j in range(100)], batch=True) and None
        ),
    )
    _report("library path, 100 memories/tx", b * 200, lib_s, lib_lat, raw_batch_rate)

    def raw_again(served: str) -> tuple[dict[int, float], float]:
        """Measure the raw baselines again, just before the served figures they stand
        beside: this machine's speed moves within a run, by 2x at times."""
        rates = {}
        for clients in (1, 8):
            n = args.singles // 2 if clients == 1 else args.singles
            raw_s, raw_lat = _timed(n, clients, lambda i: raw_insert(raw_conn(), schema, tenant, 1))
            rates[clients] = n * EVENTS_PER_MEMORY / raw_s
            _report(f"raw, {clients} client(s), beside {served}", n * 2, raw_s, raw_lat, None)
        raw_s, raw_lat = _timed(b // 2, 1, lambda i: raw_insert(raw_conn(), schema, tenant, 100))
        _report(f"raw, 100/tx, beside {served}", b // 2 * 200, raw_s, raw_lat, None)
        return rates, b // 2 * 200 / raw_s

    for n, (served, workers, settings) in enumerate(_SERVED):
        process, base = start_benchmark_serve(runtime, workers, settings | dict(args.serve_env))
        try:
            drained(runtime)
            if args.analyze:
                with runtime.database.owner_connection() as conn:
                    conn.execute("ANALYZE")
            again = raw_again(served)
            _http_writes(
                base,
                headers,
                args,
                served,
                (raw_rates, raw_batch_rate),
                again,
                lambda: raw_insert(raw_conn(), schema, tenant, 1),
            )
            # At rest, as the HTTP figures are: the thousands of memories the HTTP
            # writes left would otherwise take a batch of every pass of the drains
            # during the load (they publish each tenant's work in turn), and its
            # reads would measure that backlog. A tenant of its own, too.
            drained(runtime)
            loaded = create_tenant(runtime.log, f"load-{n}")
            load_headers = {"Authorization": f"Bearer {loaded.token}"}
            line = _concurrent_load(base, load_headers, args.load_seconds)
            print(f"concurrent load, {served}: {line}", flush=True)
        finally:
            stop_serve(process)
    for conn in raw_conns:
        conn.close()
    runtime.close()


BLOCK = 50
"""Writes in each block of :func:`_interleaved`."""


def _interleaved(
    client: KeepAliveClient,
    body: Callable[[int], object],
    raw_one: Callable[[], object],
    count: int,
    served: str,
) -> None:
    """One client's HTTP single writes and raw single writes, ``count`` of each, in
    alternate blocks of :data:`BLOCK` from one thread: the machine's speed moves by
    2x within a run here (docs/benchmarks.md), and each kind then has the same
    share of its fast and slow moments. Prints their ratio."""
    took = {"http": 0.0, "raw": 0.0}
    latencies: list[float] = []
    try:
        for block in range(count // BLOCK):
            started = time.perf_counter()
            for _ in range(BLOCK):
                raw_one()
            took["raw"] += time.perf_counter() - started
            started = time.perf_counter()
            for i in range(BLOCK):
                began = time.perf_counter()
                client.json("POST", "/v1/memories", body(block * BLOCK + i))
                latencies.append(time.perf_counter() - began)
            took["http"] += time.perf_counter() - started
    finally:
        client.close()
    n = count // BLOCK * BLOCK
    _report(
        f"HTTP POST, 1 client, {served}, interleaved with raw in blocks of {BLOCK}",
        n * EVENTS_PER_MEMORY,
        took["http"],
        latencies,
        n * EVENTS_PER_MEMORY / took["raw"],
    )


def drained(runtime: Runtime, timeout_s: float = 300.0) -> None:
    """Wait until the served drains have published every memory the library parts
    left dirty: a service at rest, not one working through a backlog, is what the
    HTTP figures measure (the concurrent load's own writes keep the drains busy)."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if revision_totals(runtime.log)["dirty_memories"] == 0:
            print(f"  (drains caught up in {time.monotonic() - started:.1f} s)", flush=True)
            return
        time.sleep(0.5)
    print(f"  (drains still behind after {timeout_s:.0f} s)", flush=True)


def _http_writes(
    base: str,
    headers: dict[str, str],
    args: argparse.Namespace,
    served: str,
    raw: tuple[dict[int, float], float],
    again: tuple[dict[int, float], float],
    raw_one: Callable[[], object],
) -> None:
    """Single writes from 1 and 8 clients, then batches of 100, against ``served`` (a
    label of :data:`_SERVED`) at ``base``; each beside the raw rates of the same transaction size
    (``raw``: the run's first, by clients, and of batches; ``again``: the same,
    measured just before). One client's writes also alternate, in blocks, with
    ``raw_one`` (one raw single write)."""
    (raw_rates, raw_batch_rate), (again_rates, again_batch_rate) = raw, again

    def run(
        count: int, clients: int, path: str, body: Callable[[int], object]
    ) -> tuple[float, list[float]]:
        """Time ``count`` POSTs from ``clients`` threads, each on a connection of its
        own, opened before the clock starts and closed after it stops (an idle
        one would be closed by the server after its keep-alive timeout)."""
        idle: queue.LifoQueue[KeepAliveClient] = queue.LifoQueue()
        for _ in range(clients):
            idle.put(KeepAliveClient(base, headers))

        def post(i: int) -> None:
            client = idle.get()
            try:
                client.json("POST", path, body(i))
            finally:
                idle.put(client)

        try:
            return _timed(count, clients, post)
        finally:
            while not idle.empty():
                idle.get().close()

    def note(i: int) -> object:
        return {"type": "note", "scope": "bench", "content": f"w {i} {served}"}

    run(100, 8, "/v1/memories", note)  # statements prepared, caches warm
    _interleaved(KeepAliveClient(base, headers), note, raw_one, args.singles, served)
    for clients in (1, 8):
        n = args.singles if clients == 1 else args.singles * 2
        http_s, http_lat = run(n, clients, "/v1/memories", note)
        _report(
            f"HTTP POST, {clients} client(s), {served}",
            n * 2,
            http_s,
            http_lat,
            raw_rates[clients],
            again_rates[clients],
        )
    if served == _SERVED[0][0]:
        # The same writes through httpx, for what the client alone costs.
        with httpx2.Client(base_url=base, headers=headers, timeout=30) as full:
            n = args.singles // 2
            http_s, http_lat = _timed(
                n,
                1,
                lambda i: (
                    full.post(
                        "/v1/memories", json={"type": "note", "scope": "bench", "content": f"x {i}"}
                    ).raise_for_status()
                    and None
                ),
            )
        _report(
            "  the same, 1 client through httpx",
            n * 2,
            http_s,
            http_lat,
            raw_rates[1],
            again_rates[1],
        )
    items = [
        {"op": "create_memory", "type": "note", "scope": "bench", "content": f"n {j}"}
        for j in range(100)
    ]
    b = args.batches
    http_s, http_lat = run(b, 1, "/v1/batch", lambda i: {"items": items})
    _report(
        f"HTTP POST /v1/batch (100), {served}",
        b * 200,
        http_s,
        http_lat,
        raw_batch_rate,
        again_batch_rate,
    )


if __name__ == "__main__":
    main()
