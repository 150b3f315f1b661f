"""Revision lag: commit to ``current`` at sustained write rates, in-process drains.

Usage: python tests/benchmarks/revision_lag.py [--seconds S] [--rates 50,200,500]

A fresh embedded PostgreSQL; the drain loop ``palimpsest serve`` runs
(woken after each write, sweeping every second). Writers create one memory
per write at a paced rate. For each memory, the lag is the time from the
write returning (committed) to the drain's publish committing. Then a
backlog of memories is drained to measure throughput, beside the raw cost of
the same belief and revision upserts through psycopg in the same run. It
measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import palimpsest.projections.drains.revision as drain_module
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec, Writer
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.conftest import library_writer


def _instrument_publish() -> dict[Any, float]:
    """Record when each memory's publish commits (benchmark-only instrumentation)."""
    done: dict[Any, float] = {}
    original = drain_module._publish_all

    def publish(log: Any, tenant_id: Any, beliefs: Any) -> None:
        original(log, tenant_id, beliefs)
        now = time.perf_counter()
        for belief in beliefs:
            done.setdefault(belief.memory_id, now)

    drain_module._publish_all = publish
    return done


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _paced_writes(
    writer: Writer, caller: Caller, rate: int, seconds: float, wake: Any
) -> dict[Any, float]:
    committed: dict[Any, float] = {}
    lock = threading.Lock()
    threads = 2 if rate < 300 else 4
    interval = threads / rate

    def run(offset: int) -> None:
        start = time.perf_counter() + offset * interval / threads
        n = 0
        while True:
            due = start + n * interval
            if due - start > seconds:
                return
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            body = writer.write(
                caller,
                [MemorySpec("note", "bench", None, None, f"n {uuid.uuid4()}", (), None, 1.0)],
                batch=False,
            ).body
            now = time.perf_counter()
            wake()
            with lock:
                committed[uuid.UUID(body["id"])] = now
            n += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return committed


def _raw_upserts(runtime: Runtime, tenant: str, count: int) -> float:
    """Upsert ``count`` belief and watermark rows through psycopg: the drain's own two
    statements, 100 memories per transaction, with precomputed rows."""
    database = runtime.database
    schema = database.schema
    conninfo = make_conninfo(
        "",
        **{
            **database.owner_conninfo(),
            "user": database.app_user,
            "password": database.app_password,
        },
    )
    document = json.dumps({"grade": "unsupported", "support": [], "reasons": []})
    ids = [uuid.uuid4() for _ in range(count)]
    with psycopg.connect(conninfo) as conn:
        with conn.transaction():
            conn.execute("SELECT set_config('palimpsest.tenant_id', %s, true)", (tenant,))
            conn.execute(
                f'INSERT INTO "{schema}".revisions (memory_id, requested)'
                " SELECT unnest(%s::uuid[]), 1",
                (ids,),
            )
        started = time.perf_counter()
        for i in range(0, count, 100):
            chunk = ids[i : i + 100]
            with conn.transaction():
                conn.execute("SELECT set_config('palimpsest.tenant_id', %s, true)", (tenant,))
                conn.execute(
                    f'INSERT INTO "{schema}".beliefs (memory_id, revision, memory_type, scope,'
                    " project, topic, current_version_id, grade, belief) SELECT m, 1, 'note',"
                    " 'bench', NULL, NULL, m, 'unsupported', d FROM unnest(%s::uuid[],"
                    " %s::jsonb[]) AS u(m, d) ON CONFLICT (tenant_id, memory_id) DO UPDATE SET"
                    " revision = excluded.revision WHERE beliefs.revision < excluded.revision",
                    (chunk, [document] * len(chunk)),
                )
                conn.execute(
                    f'UPDATE "{schema}".revisions r SET published = greatest(r.published, 1),'
                    " claimed_until = NULL FROM unnest(%s::uuid[]) AS u(id)"
                    " WHERE r.memory_id = u.id",
                    (chunk,),
                )
        return count / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rates", default="50,200,500")
    parser.add_argument("--backlog", type=int, default=3000)
    args = parser.parse_args()
    runtime = start_runtime(DatabaseSettings(data_dir=Path(tempfile.mkdtemp(prefix="pal-lag-"))))
    issued = create_tenant(runtime.log, "lag")
    caller = authenticate(runtime.log, issued.token)
    writer = library_writer(runtime)
    done = _instrument_publish()
    loop = DrainLoop(runtime.log, sweep_s=1.0, batch=100)
    loop.start()
    print(
        f"revision lag: {args.seconds:.0f} s per rate, in-process drain loop, "
        f"PostgreSQL at {runtime.database.host}",
        flush=True,
    )
    for rate in (int(r) for r in args.rates.split(",")):
        started = time.perf_counter()
        committed = _paced_writes(writer, caller, rate, args.seconds, loop.wake)
        achieved = len(committed) / (time.perf_counter() - started)
        deadline = time.perf_counter() + 60
        while time.perf_counter() < deadline and not all(m in done for m in committed):
            time.sleep(0.01)
        lags = [1000 * (done[m] - t) for m, t in committed.items() if m in done]
        skipped = len(committed) - len(lags)
        print(
            f"{rate:>4} writes/s target ({achieved:6.1f} achieved): lag p50 "
            f"{statistics.median(lags):7.2f} ms  p99 {_pct(lags, 0.99):7.2f} ms  "
            f"max {max(lags):7.2f} ms  skipped {skipped}",
            flush=True,
        )
    loop.stop()

    # Backlog throughput: write first, then drain with nothing else running.
    for i in range(0, args.backlog, 100):
        writer.write(
            caller,
            [
                MemorySpec("note", "bench", None, None, f"b{i + j}", (), None, 1.0)
                for j in range(100)
            ],
            batch=True,
        )
    started = time.perf_counter()
    drained = 0
    while (report := drain_revisions(runtime.log, limit=100)).claimed:
        drained += report.published
    drain_rate = drained / (time.perf_counter() - started)
    raw_rate = _raw_upserts(runtime, str(caller.tenant_id), args.backlog)
    print(
        f"drain throughput: {drain_rate:8.0f} memories/s   raw psycopg upserts of the same rows: "
        f"{raw_rate:8.0f} memories/s   = {drain_rate / raw_rate:4.2f}x raw",
        flush=True,
    )
    runtime.close()


if __name__ == "__main__":
    main()
