"""Append throughput: the library write path, HTTP, and raw psycopg, in one run.

Usage: python tests/benchmarks/append.py [--singles N] [--batches N]

Starts a fresh embedded PostgreSQL in a temporary directory (or uses
DATABASE_URL), then measures, each beside the same rows through raw psycopg
in the same transaction sizes:

- single writes (one memory = MemoryCreated + VersionRecorded + one payload
  row per transaction) through the library path (``Writer.write``) and over
  HTTP at 1 and 8 concurrent clients, with p50/p99 latency;
- batches of 100 memories (200 events, 100 payload rows per transaction).

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx2
import psycopg
import uvicorn
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from api.app import create_app
from api.settings import ApiSettings
from projections.commands.tokens import authenticate, create_tenant
from projections.commands.writer import CapturePolicy, MemorySpec, Writer
from projections.runtime import Runtime, start_runtime
from projections.store.schema import EVENTS_TABLE
from projections.store.settings import DatabaseSettings

EVENTS_PER_MEMORY = 2
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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(
    name: str, events: int, seconds: float, latencies: list[float] | None, baseline: float | None
) -> None:
    rate = events / seconds
    line = f"{name:<42} {rate:>10,.0f} events/s"
    if latencies:
        p50, p99 = 1000 * statistics.median(latencies), 1000 * _pct(latencies, 0.99)
        line += f"   p50 {p50:6.2f} ms  p99 {p99:6.2f} ms"
    if baseline:
        line += f"   = {rate / baseline:4.2f}x raw"
    print(line, flush=True)


def _raw_setup(runtime: Runtime) -> None:
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


def _raw_insert(
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


def main() -> None:  # noqa: PLR0915 (a benchmark script reads best top to bottom)
    parser = argparse.ArgumentParser()
    parser.add_argument("--singles", type=int, default=1500)
    parser.add_argument("--batches", type=int, default=60)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="palimpsest-bench-"))
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    _raw_setup(runtime)
    issued = create_tenant(runtime.log, "bench")
    caller = authenticate(runtime.log, issued.token)
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )

    def spec(i: int) -> MemorySpec:
        return MemorySpec("note", "bench", None, None, f"note {i} {uuid.uuid4()}", (), None, 1.0)

    app = create_app(ApiSettings(), runtime)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
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

    def http_client() -> httpx2.Client:
        if not hasattr(local, "client"):
            local.client = httpx2.Client(base_url=f"http://127.0.0.1:{port}", headers=headers)
        return local.client  # type: ignore[no-any-return]

    print(
        f"append benchmark: {args.singles} single writes, {args.batches} batches of 100; "
        f"PostgreSQL at {runtime.database.host}",
        flush=True,
    )
    for clients in (1, 8):
        n = args.singles if clients == 1 else args.singles * 2
        raw_s, raw_lat = _timed(n, clients, lambda i: _raw_insert(raw_conn(), schema, tenant, 1))
        raw_rate = n * EVENTS_PER_MEMORY / raw_s
        _report(f"raw psycopg, 1 memory/tx, {clients} client(s)", n * 2, raw_s, raw_lat, None)
        lib_s, lib_lat = _timed(
            n, clients, lambda i: writer.write(caller, [spec(i)], batch=False) and None
        )
        _report(f"library path, 1 memory/tx, {clients} client(s)", n * 2, lib_s, lib_lat, raw_rate)
        http_s, http_lat = _timed(
            n,
            clients,
            lambda i: (
                http_client()
                .post("/v1/memories", json={"type": "note", "scope": "bench", "content": f"n {i}"})
                .raise_for_status()
                and None
            ),
        )
        _report(f"HTTP POST /v1/memories, {clients} client(s)", n * 2, http_s, http_lat, raw_rate)

    b = args.batches
    raw_s, raw_lat = _timed(b, 1, lambda i: _raw_insert(raw_conn(), schema, tenant, 100))
    raw_rate = b * 200 / raw_s
    _report("raw psycopg, 100 memories/tx", b * 200, raw_s, raw_lat, None)
    lib_s, lib_lat = _timed(
        b,
        1,
        lambda i: (
            writer.write(caller, [spec(i * 100 + j) for j in range(100)], batch=True) and None
        ),
    )
    _report("library path, 100 memories/tx", b * 200, lib_s, lib_lat, raw_rate)
    items = [
        {"op": "create_memory", "type": "note", "scope": "bench", "content": f"n {j}"}
        for j in range(100)
    ]
    http_s, http_lat = _timed(
        b,
        1,
        lambda i: (
            http_client().post("/v1/batch", json={"items": items}).raise_for_status() and None
        ),
    )
    _report("HTTP POST /v1/batch (100 memories)", b * 200, http_s, http_lat, raw_rate)

    server.should_exit = True
    thread.join(timeout=10)
    for conn in raw_conns:
        conn.close()
    runtime.close()


if __name__ == "__main__":
    main()
