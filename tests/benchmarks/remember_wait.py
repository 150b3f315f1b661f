"""What MCP ``remember`` adds to a write by waiting for the new memory's potential conflicts.

Usage: python tests/benchmarks/remember_wait.py [--writes 100] [--wait-s 1.0]

A fresh embedded PostgreSQL; the drain loop ``palimpsest serve`` and ``palimpsest
mcp`` run (woken after each write, sweeping every second), with the real local
embedding model, loaded before the first write. Through the MCP SDK's in-process
client, ``--writes`` preferences of one scope are remembered one after another
(template sentences: the store fills with similar memories, so later ones have
conflicts to describe), each a ``remember`` call as an agent makes it:

- **added wait**: inside the tool, from the write's commit to the answer's
  potential conflicts being ready and described (the wait for the embedding,
  bounded by ``--wait-s``, ``PALIMPSEST_MCP_CONFLICT_WAIT_S``, then the reads of
  their texts), measured per call;
- **remember**: the whole call, against the same calls with no drain known to run
  (the tool looks once and answers ``pending``), in the same run: the baseline.

It measures and prints; it asserts nothing. docs/benchmarks.md holds the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from mcp import Client

from palimpsest.api.mcp import _write_tools as write_tools
from palimpsest.api.mcp._backend import Backend
from palimpsest.api.mcp._server import build_server
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.candidates import Candidates
from tests.benchmarks.sentences import sentences

_added: list[float] = []
"""Each call's added wait, in seconds (benchmark-only instrumentation)."""


def _instrument() -> None:
    """Time, inside the tool, the span from the write's answer to the described
    conflicts: ``await_conflicts`` through ``describe_conflicts`` (the calls run one
    after another)."""
    # The tool looks both up in its module when it runs: replaced there, they are timed.
    waited = getattr(write_tools, "await_conflicts")  # noqa: B009
    described = getattr(write_tools, "describe_conflicts")  # noqa: B009
    started: list[float] = []

    async def await_conflicts(*given: Any) -> Candidates:
        started.append(time.perf_counter())
        found: Candidates = await waited(*given)
        return found

    def describe_conflicts(*given: Any) -> Any:
        result = described(*given)
        _added.append(time.perf_counter() - started.pop())
        return result

    setattr(write_tools, "await_conflicts", await_conflicts)  # noqa: B010
    setattr(write_tools, "describe_conflicts", describe_conflicts)  # noqa: B010


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _line(name: str, values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return (
        f"{name:<34} p50 {_pct(ms, 0.50):7.1f} ms  p99 {_pct(ms, 0.99):7.1f} ms"
        f"  mean {statistics.fmean(ms):7.1f} ms  max {max(ms):7.1f} ms"
    )


async def _remember_all(
    backend: Backend, texts: list[str], scope: str
) -> tuple[list[float], dict[str, int]]:
    seconds: list[float] = []
    statuses: dict[str, int] = {}
    async with Client(build_server(backend)) as client:
        for text in texts:
            started = time.perf_counter()
            result = await client.call_tool(
                "remember", {"content": text, "type": "preference", "scope": scope}
            )
            seconds.append(time.perf_counter() - started)
            assert not result.is_error, result.content
            found = result.structured_content or {}
            status = str(found.get("conflicts_status"))
            statuses[status] = statuses.get(status, 0) + 1
            if found.get("potential_conflicts"):
                statuses["with conflicts"] = statuses.get("with conflicts", 0) + 1
    return seconds, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--wait-s", type=float, default=1.0)
    args = parser.parse_args()
    _instrument()
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        try:
            runtime.embedder.embed(["the model loads before the first write"])
            runtime.publications.start()  # as serve and palimpsest mcp start it
            token = create_tenant(runtime.log, "remember-wait").token
            writer = Writer(
                runtime.log,
                CapturePolicy(timedelta(days=30), timedelta(hours=24)),
                lambda: datetime.now(UTC),
            )
            drains = DrainLoop(runtime.log, embedder=runtime.embedder)
            drains.start()
            try:
                common: dict[str, Any] = {
                    "runtime": runtime,
                    "writer": writer,
                    "wake": drains.wake,
                    "clock": lambda: datetime.now(UTC),
                    "token": token,
                }
                texts = sentences(2 * args.writes)
                waiting = Backend(**common, drains=True, conflict_wait_s=args.wait_s)
                unwaited = Backend(**common, drains=False)
                measured, statuses = asyncio.run(_remember_all(waiting, texts[: args.writes], "a"))
                added = list(_added)
                baseline, _ = asyncio.run(_remember_all(unwaited, texts[args.writes :], "b"))
            finally:
                drains.stop()
        finally:
            runtime.close()
    print(f"{args.writes} remembers each way, wait bound {args.wait_s} s")
    print(_line("added wait (commit to conflicts)", added))
    print(_line("remember, waiting for conflicts", measured))
    print(_line("remember, no wait (baseline)", baseline))
    print(f"conflicts: {statuses}")


if __name__ == "__main__":
    main()
