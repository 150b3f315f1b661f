"""Revisions of a memory with a long history, beside revisions of a new one, in one run.

Usage: python tests/benchmarks/long_history.py [--history N] [--revisions N]

Starts a fresh embedded PostgreSQL in a temporary directory (or uses
DATABASE_URL), gives one ``fact`` a history of ``--history`` versions, then
times ``--revisions`` revisions of it through the library path, each followed
by the drains' pass that publishes it (the two timed apart), alternated with
the same revisions of a fact of one version (the baseline). An agent revises a user's preference for
months: what a revision costs must not grow with the versions before it.

The statistics of the events table are refreshed first (as autovacuum does on a
table this size), so the planner sees the table as it is.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec, VersionSpec, Writer
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.store.sql import schema_query
from tests.conftest import library_writer


def _fact(writer: Writer, caller: Caller, text: str) -> UUID:
    spec = MemorySpec("fact", "bench", None, None, text, (), None, 1.0)
    return UUID(str(writer.write(caller, [spec], batch=False).body["id"]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, default=2000)
    parser.add_argument("--revisions", type=int, default=300)
    args = parser.parse_args()
    runtime = start_runtime(
        DatabaseSettings(data_dir=Path(tempfile.mkdtemp(prefix="palimpsest-bench-")))
    )
    try:
        issued = create_tenant(runtime.log, "bench")
        caller = authenticate(runtime.log, issued.token)
        writer = library_writer(runtime)
        drains = DrainLoop(runtime.log, sweep_s=60.0, batch=100, lease_s=30.0, embedder=None)
        long, short = _fact(writer, caller, "long v0"), _fact(writer, caller, "short v0")
        print(f"long history: {args.history} versions, then {args.revisions} revisions of each")
        for i in range(args.history):
            writer.write(caller, [VersionSpec(long, f"long v{i + 1}", (), None, 1.0)], batch=False)
            if (i + 1) % 500 == 0:
                print(f"  {i + 1} of {args.history} versions", flush=True)
        drains.run_once(first=True)
        with runtime.database.owner_connection() as owner:
            owner.execute(schema_query("ANALYZE {schema}.{events}", runtime.log.datastore.schema))
        writes: dict[UUID, list[float]] = {long: [], short: []}
        passes: dict[UUID, list[float]] = {long: [], short: []}
        for i in range(args.revisions):
            for memory_id in (long, short):
                started = time.perf_counter()
                writer.write(caller, [VersionSpec(memory_id, f"r{i}", (), None, 1.0)], batch=False)
                written = time.perf_counter()
                drains.run_once()
                writes[memory_id].append(written - started)
                passes[memory_id].append(time.perf_counter() - written)
        for what, timings in (("revision", writes), ("drains' pass", passes)):
            base = statistics.median(timings[short])
            for label, memory_id in (("one version (baseline)", short), ("long history", long)):
                values = sorted(timings[memory_id])
                p50, p99 = statistics.median(values), values[int(len(values) * 0.99) - 1]
                print(
                    f"{what:13} {label:23} p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms"
                    f"   = {p50 / base:4.2f}x the baseline"
                )
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
