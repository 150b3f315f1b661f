"""Rebuild and verify at scale, and as-of reads of a memory with a long history.

Usage: python tests/benchmarks/rebuild.py [--events 1000000] [--tenants 4] [--blocks 3]
[--reads 500] [--data-dir D] [--also-whole]

``--also-whole`` runs, in each block, rebuild and verify a second time with every
tenant replayed whole (no tenant split in parts): the change measured in one run.

With ``--data-dir`` naming a store an earlier run generated, generation is
skipped (it takes minutes; the measurements do not depend on it).

A fresh embedded PostgreSQL. Generates a realistic mix through the write path
(observations; memories citing them, proposed by two models; revisions with
evidence; edges; withdrawals and forgets), then measures, in one run:

- in ``--blocks`` alternated blocks: a raw sequential scan of the events
  table (every column fetched through psycopg), the floor; ``rebuild`` end to
  end (replay, shadow copy, swap); the raw scan again; ``verify`` of the whole
  store; the raw scan again. Rebuild and verify are printed in events/s and
  as a ratio to the mean of the raw scans on either side of them (on a shared
  machine the ratio is the figure that counts), then the medians;
- as-of reads of one memory whose closure holds about 1,000 events, p50/p99.

Each figure is printed with the load average at that moment (the 1-minute
one): on a shared machine it says how much of a core the run had.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.decisions import LabelSpec, WithdrawSpec
from palimpsest.projections.commands.tokens import authenticate, create_tenant, issue_token
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EdgeSpec,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    Ref,
    VersionSpec,
    Writer,
    WriteSpec,
)
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.history.rebuild import SPLIT_FROM, rebuild
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.as_of import belief_as_of

_BATCH_ITEMS = 400


def _head(runtime: Runtime) -> int:
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT coalesce(max(notification_id), 0) FROM "{runtime.database.schema}".'
            f'"{EVENTS_TABLE}"'
        ).fetchone()
    return int(row[0]) if row else 0


def _batch(rng: random.Random, known: list[UUID]) -> list[WriteSpec]:
    """About 1,000 events: 100 observations, 200 memories citing them, revisions, edges."""
    specs: list[WriteSpec] = [
        ObservationSpec(
            f"observation {rng.random()} about the project", "text/plain", None, None, False
        )
        for _ in range(100)
    ]
    for _ in range(200):
        cited = rng.sample(range(100), rng.randint(1, 2))
        specs.append(
            MemorySpec(
                rng.choice(["fact", "preference", "decision", "note"]),
                "user",
                rng.choice(["alpha", "beta", None]),
                None,
                f"claim {rng.random()}",
                tuple(EvidenceSpec(Ref(i), 0, 11) for i in cited),
                rng.choice(["judge-1.4", "judge-2.0"]),
                0.9,
            )
        )
    for _ in range(60):
        specs.append(
            VersionSpec(
                Ref(rng.randrange(100, 300)),
                f"revised {rng.random()}",
                (EvidenceSpec(Ref(rng.randrange(100)), 0, 11),),
                "judge-2.0",
                0.8,
            )
        )
    pairs: set[tuple[int, ...]] = set()
    while len(pairs) < 40:  # the same edge twice in one batch is refused
        pairs.add(tuple(rng.sample(range(100, 300), 2)))
    for a, b in sorted(pairs):
        specs.append(
            EdgeSpec(Ref(a), rng.choice(["extends", "derived_from", "supersedes"]), Ref(b))
        )
    return specs


def _generate(runtime: Runtime, writer: Writer, callers: list[Caller], events: int) -> None:
    rng = random.Random(42)
    started = time.perf_counter()
    known: list[UUID] = []
    while (head := _head(runtime)) < events:
        caller = rng.choice(callers)
        writer.write(caller, _batch(rng, known), batch=True)
        elapsed = time.perf_counter() - started
        print(
            f"\rgenerating: {head:,}/{events:,} events, {head / elapsed:,.0f}/s", end="", flush=True
        )
    for caller in callers:
        writer.write(caller, [WithdrawSpec(None, "judge-1.4", "benchmark")], batch=False)
    print(f"\ngenerated {_head(runtime):,} events in {time.perf_counter() - started:.0f} s")


def _long_history(runtime: Runtime, writer: Writer, caller: Caller) -> tuple[UUID, list[int]]:
    """One memory with about 1,000 events of its own: 500 revisions, each with evidence."""
    observation = writer.write(
        caller,
        [ObservationSpec("a long story, told again", "text/plain", None, None, False)],
        batch=False,
    ).body["id"]
    created = writer.write(
        caller,
        [
            MemorySpec(
                "fact",
                "user",
                None,
                None,
                "v0",
                (EvidenceSpec(UUID(observation), 0, 6),),
                "judge-2.0",
                1.0,
            )
        ],
        batch=False,
    ).body
    memory = UUID(created["id"])
    positions = [created["position"]]
    for i in range(500):
        body = writer.write(
            caller,
            [
                VersionSpec(
                    memory, f"v{i + 1}", (EvidenceSpec(UUID(observation), 0, 6),), "judge-2.0", 1.0
                )
            ],
            batch=False,
        ).body
        positions.append(body["position"])
    writer.write(caller, [LabelSpec(memory, "pin", None)], batch=False)
    return memory, positions


def _existing_long_history(runtime: Runtime) -> tuple[Any, UUID, list[int]]:
    """Find the long-history memory of an earlier run: the aggregate with most events."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT originator_id, tenant_id FROM "{schema}"."{EVENTS_TABLE}"'
            " WHERE topic = 'palimpsest:VersionRecorded'"
            " GROUP BY originator_id, tenant_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()
        assert row is not None
        positions = [
            r[0]
            for r in conn.execute(
                f'SELECT notification_id FROM "{schema}"."{EVENTS_TABLE}"'
                " WHERE originator_id = %s ORDER BY notification_id",
                (row[0],),
            )
        ]
    return row[1], row[0], positions


def _events_of(runtime: Runtime, memory: UUID) -> list[int]:
    with runtime.database.owner_connection() as conn:
        return [
            r[0]
            for r in conn.execute(
                f'SELECT notification_id FROM "{runtime.database.schema}"."{EVENTS_TABLE}"'
                " WHERE originator_id = %s ORDER BY notification_id",
                (memory,),
            )
        ]


def _extend_history(runtime: Runtime, writer: Writer, tenant: Any, memory: UUID) -> None:
    """Revise the memory until it has 1,000 events of its own (an earlier, shorter run)."""
    caller = authenticate(runtime.log, issue_token(runtime.log, tenant, "bench", "admin").token)
    while len(_events_of(runtime, memory)) < 1000:
        writer.write(caller, [VersionSpec(memory, "more", (), "judge-2.0", 1.0)], batch=False)


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _raw_scan(runtime: Runtime) -> tuple[int, float]:
    started = time.perf_counter()
    rows = 0
    with (
        runtime.database.owner_connection() as conn,
        conn.transaction(),
        conn.cursor(name="raw_scan") as cur,
    ):
        cur.itersize = 5000
        cur.execute(
            "SELECT notification_id, xmin::text, originator_id, originator_version, topic,"
            f' state FROM "{runtime.database.schema}"."{EVENTS_TABLE}" ORDER BY notification_id'
        )
        for _ in cur:
            rows += 1
    return rows, time.perf_counter() - started


def _raw_rate(runtime: Runtime, rates: list[float], label: str) -> float:
    rows, seconds = _raw_scan(runtime)
    rates.append(rows / seconds)
    print(
        f"{label} raw scan: {rows:,} events in {seconds:.1f} s = {rates[-1]:,.0f} events/s"
        f" ({_load()})"
    )
    return rates[-1]


def _measure_blocks(runtime: Runtime, blocks: int, ways: dict[str, int]) -> None:
    """Rebuild and verify, each between raw scans, ``blocks`` times, each of ``ways``
    (a name and the ``split_from`` it passes) in turn; print every ratio."""
    raw_rates: list[float] = []
    rebuild_ratios: dict[str, list[float]] = {way: [] for way in ways}
    verify_ratios: dict[str, list[float]] = {way: [] for way in ways}
    for block in range(1, blocks + 1):
        for way, split_from in ways.items():
            # Alternated with the raw scan, so each is judged against the floor
            # measured on either side of it: the machine is shared and its load moves.
            label = f"block {block} {way}"
            before = _raw_rate(runtime, raw_rates, f"block {block}")
            done = rebuild(
                runtime.database,
                split_from=split_from,
                report=lambda line: print("  " + line, flush=True),
            )
            rate = done.events / done.seconds
            after = _raw_rate(runtime, raw_rates, f"block {block}")
            rebuild_ratios[way].append(rate / ((before + after) / 2))
            print(
                f"{label} rebuild: {done.events:,} events in {done.seconds:.1f} s = "
                f"{rate:,.0f} events/s ({rebuild_ratios[way][-1]:.2f}x raw scan), "
                f"{done.workers} workers; swap {done.swap_seconds:.2f} s ({_load()})",
                flush=True,
            )
            started = time.perf_counter()
            checked = verify(
                runtime.database,
                split_from=split_from,
                report=lambda line: print("  " + line, flush=True),
            )
            verify_s = time.perf_counter() - started
            verify_rate = checked.events / verify_s
            later = _raw_rate(runtime, raw_rates, f"block {block}")
            verify_ratios[way].append(verify_rate / ((after + later) / 2))
            print(
                f"{label} verify: {checked.events:,} events, {checked.rows:,} rows, "
                f"{len(checked.divergences)} divergences in {verify_s:.1f} s = "
                f"{verify_rate:,.0f} events/s ({verify_ratios[way][-1]:.2f}x raw scan) "
                f"({_load()})",
                flush=True,
            )
    for way in ways:
        print(
            f"median of {blocks} blocks, {way}: raw scan {statistics.median(raw_rates):,.0f}"
            f" events/s; rebuild {statistics.median(rebuild_ratios[way]):.2f}x raw,"
            f" verify {statistics.median(verify_ratios[way]):.2f}x raw ({_load()})"
        )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--reads", type=int, default=500, help="as-of reads (0: none)")
    parser.add_argument("--blocks", type=int, default=3, help="alternated measuring blocks")
    parser.add_argument("--data-dir", type=Path, help="reuse a store an earlier run generated")
    parser.add_argument(
        "--also-whole",
        action="store_true",
        help="in each block, also rebuild and verify with no tenant split in parts",
    )
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="pal-rebuild-"))
    print(f"store: {data_dir}", flush=True)
    runtime = start_runtime(DatabaseSettings(data_dir=data_dir))
    writer = Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )
    if _head(runtime) >= args.events:
        tenant, memory, positions = _existing_long_history(runtime)
        with runtime.database.owner_connection() as conn:
            # Snapshots of an earlier run may predate the current snapshot format;
            # the rebuild below writes them all again.
            conn.execute(f'TRUNCATE "{runtime.database.schema}".palimpsest_snapshots')
        _extend_history(runtime, writer, tenant, memory)
        positions = _events_of(runtime, memory)
    else:
        callers = [
            authenticate(runtime.log, create_tenant(runtime.log, f"bench-{i}").token)
            for i in range(args.tenants)
        ]
        tenant = callers[0].tenant_id
        memory, positions = _long_history(runtime, writer, callers[0])
        _generate(runtime, writer, callers, args.events)
    while drain_revisions(runtime.log, limit=1000).claimed:
        pass

    ways = {"default": SPLIT_FROM, **({"whole tenants": 2**62} if args.also_whole else {})}
    _measure_blocks(runtime, args.blocks, ways)
    if args.reads == 0:
        runtime.close()
        return

    gc.freeze()  # as `palimpsest serve` does once started
    own = len(_events_of(runtime, memory))
    for label, cache_entries in (("cold, cache off", 0), ("version cache on", 10_000)):
        runtime.version_cache.resize(cache_entries)
        rng = random.Random(7)
        latencies = []
        for _ in range(args.reads):
            position = rng.choice(positions[len(positions) // 2 :])
            started = time.perf_counter()
            belief_as_of(runtime.log, tenant, memory, position)
            latencies.append(1000 * (time.perf_counter() - started))
        print(
            f"as-of read of a memory with {own:,} events of its own ({label}): p50 "
            f"{statistics.median(latencies):.1f} ms, p99 {_pct(latencies, 0.99):.1f} ms"
        )
    runtime.close()


if __name__ == "__main__":
    main()
