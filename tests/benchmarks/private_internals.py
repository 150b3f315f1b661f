"""Each piece of machinery that leans on another library's internals, on and off, in one run.

Usage: python tests/benchmarks/private_internals.py [--writes N] [--rounds R] [--fill M]
                                                     [--threads-writes T]

Issue 47 asks each adapter of a library's internals to pay more than it costs. One
client writes single memories (the lean keep-alive client), in rounds whose order
alternates, to each of these, all on one database and beside raw psycopg's rows
(the append benchmark's baseline) measured in the same rounds:

- ``library`` / ``library, unqueued``: ``Writer.write`` in this process, its
  transaction sent by libpq directly (``_psycopg_internals``) or through psycopg's
  pipeline (the event log's queuing cursors refusing at their first statement);
- ``serve``: ``palimpsest serve --workers 1`` with the drain process, as configured
  by default (plain requests, queued writes);
- ``serve -plain``: plain requests off (``PlainRoute`` builds FastAPI's own handler:
  ``_fastapi_internals`` unused);
- ``serve -queued``: the serving process's writes through psycopg's pipeline.

With ``--threads-writes`` it also times eight library threads, queued and not. It
prints each kind's mean, p50, p99 and ratio to raw, then each machinery's pairs by
round. It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store import _recorder, queued
from palimpsest.projections.store.eventlog import SERVING_GROUPS_AHEAD
from palimpsest.projections.store.settings import DatabaseSettings
from tests.api.cli.serving import free_port, serve_env, stop_serve
from tests.benchmarks.append import QUIET, drained, percentile, raw_insert, raw_setup
from tests.benchmarks.lean_http import KeepAliveClient
from tests.benchmarks.write_floor import _fill
from tests.conftest import library_writer

SERVES: dict[str, tuple[dict[str, str], str]] = {
    "serve": ({}, ""),
    "serve -plain": ({}, "plain"),
    "serve -queued": ({}, "queued"),
}
"""Each served kind: its settings, and the machinery turned off in its process."""

_QUEUING = vars(_recorder)["QueuingCursor"]
"""The queuing cursor of the write path (H1's recorder module: follow it if it moves)."""


class _Refusing(queued.QueuingCursor):
    """A queuing cursor that refuses its first statement: the write goes through
    psycopg's pipeline, as it did before queued writes."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        msg = "queued writes off"
        raise queued.UnqueueableError(msg)


def _queued_writes(on: bool) -> None:
    vars(_recorder)["QueuingCursor"] = _QUEUING if on else _Refusing


def _turn_off(machinery: str) -> None:
    """Turn off ``machinery`` (``plain``, ``queued`` or nothing) in this process."""
    if machinery == "plain":
        from fastapi.routing import APIRoute

        from palimpsest.api._plain_requests import PlainRoute

        PlainRoute.get_route_handler = APIRoute.get_route_handler  # type: ignore[method-assign]
    elif machinery == "queued":
        _queued_writes(on=False)


def _serve(
    runtime: Runtime, settings: dict[str, str], off: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``serve --workers 1`` with the drain process and ``off`` turned off in the
    serving process; return it and its base URL once healthy."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.benchmarks.private_internals",
            "--serve",
            off,
            "--port",
            str(port),
        ],
        cwd=Path(__file__).resolve().parents[2],
        env=serve_env(runtime, QUIET | {"PALIMPSEST_DRAIN_PROCESS": "1"} | settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                return process, base
        except httpx2.TransportError:
            time.sleep(0.3)
    os.killpg(process.pid, signal.SIGKILL)
    msg = f"serve ({off or 'defaults'}) did not start"
    raise RuntimeError(msg)


def _eight_threads(write: Callable[[int], object], writes: int, *, queued_on: bool) -> float:
    """Writes/s of eight threads writing ``writes`` in all, queued or not."""
    _queued_writes(on=queued_on)
    try:
        threads = [
            threading.Thread(target=lambda: [write(i) for i in range(writes // 8)])
            for _ in range(8)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return (writes // 8) * 8 / (time.perf_counter() - started)
    finally:
        _queued_writes(on=True)


def main() -> None:  # noqa: PLR0912, PLR0915 (one benchmark, start to end)
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=300, help="writes per kind a round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--fill", type=int, default=1000, help="memories in the tenant first")
    parser.add_argument("--threads-writes", type=int, default=800, help="0: no threads")
    args = parser.parse_args()
    runtime = start_runtime(DatabaseSettings(data_dir=Path(tempfile.mkdtemp(prefix="pal-int-"))))
    runtime.log.group.ahead = SERVING_GROUPS_AHEAD
    served: list[subprocess.Popen[bytes]] = []
    clients: dict[str, KeepAliveClient] = {}
    try:
        raw_setup(runtime)
        issued, caller = _fill(runtime, args.fill)
        writer = library_writer(runtime)
        schema, tenant = runtime.database.schema, str(issued.tenant_id)
        db = runtime.database
        user = {"user": db.app_user, "password": db.app_password}
        raw = psycopg.connect(make_conninfo("", **(db.owner_conninfo() | user)))
        headers = {"Authorization": f"Bearer {issued.token}"}
        bases: dict[str, str] = {}
        for name, (settings, off) in SERVES.items():
            process, bases[name] = _serve(runtime, settings, off)
            served.append(process)
            clients[name] = KeepAliveClient(bases[name], headers)

        def library(i: int) -> object:
            spec = MemorySpec("note", "bench", None, None, f"l {i} {uuid.uuid4()}", (), None, 1.0)
            return writer.write(caller, [spec], batch=False)

        def unqueued(i: int) -> object:
            _queued_writes(on=False)
            try:
                return library(i)
            finally:
                _queued_writes(on=True)

        def over_http(name: str) -> Callable[[int], object]:
            body = {"type": "note", "scope": "bench"}
            return lambda i: clients[name].json(
                "POST", "/v1/memories", body | {"content": f"{name} {i} {uuid.uuid4()}"}
            )

        kinds: dict[str, Callable[[int], object]] = {
            "raw": lambda i: raw_insert(raw, schema, tenant, 1),
            "library": library,
            "library, unqueued": unqueued,
        } | {name: over_http(name) for name in SERVES}
        for one in kinds.values():  # statements prepared, caches warm
            for i in range(100):
                one(i)
        drained(runtime)
        took: dict[str, list[list[float]]] = {kind: [] for kind in kinds}
        threads: dict[bool, list[float]] = {True: [], False: []}
        print(f"{args.rounds} rounds of {args.writes} writes a kind; mean ms by round", flush=True)
        for r in range(args.rounds):
            for kind in list(kinds) if r % 2 == 0 else list(reversed(kinds)):
                if kind in clients:  # uvicorn closes a connection idle for 5 s
                    clients[kind].close()
                    clients[kind] = KeepAliveClient(bases[kind], headers)
                    for i in range(5):
                        kinds[kind](i)
                latencies = []
                for i in range(args.writes):
                    started = time.perf_counter()
                    kinds[kind](r * args.writes + i)
                    latencies.append(time.perf_counter() - started)
                took[kind].append(latencies)
            if args.threads_writes:
                for on in (True, False) if r % 2 == 0 else (False, True):
                    threads[on].append(_eight_threads(library, args.threads_writes, queued_on=on))
            print(
                f"  round {r}: "
                + "  ".join(f"{k} {1000 * statistics.mean(v[-1]):.2f}" for k, v in took.items()),
                flush=True,
            )
        _summary(took, threads)
    finally:
        for client in clients.values():
            client.close()
        for process in served:
            stop_serve(process)
        runtime.close()


def _summary(took: dict[str, list[list[float]]], threads: dict[bool, list[float]]) -> None:
    raw_means = [statistics.mean(r) for r in took["raw"]]
    overall_raw = statistics.mean(x for r in took["raw"] for x in r)
    print("\nkind                  mean ms  p50 ms  p99 ms  ratio to raw (overall; rounds)")
    for kind, rounds in took.items():
        every = [x for r in rounds for x in r]
        ratios = [rm / statistics.mean(r) for rm, r in zip(raw_means, rounds, strict=True)]
        print(
            f"{kind:<21} {1000 * statistics.mean(every):7.2f}"
            f" {1000 * statistics.median(every):7.2f} {1000 * percentile(every, 0.99):7.2f}"
            f"  {overall_raw / statistics.mean(every):.2f}x;"
            f" {min(ratios):.2f}-{max(ratios):.2f}x",
            flush=True,
        )
    print("\neach machinery, by round: the time a write takes without it over with it")
    for with_it, without in (
        ("library", "library, unqueued"),
        ("serve", "serve -plain"),
        ("serve", "serve -queued"),
    ):
        ratios = [
            statistics.mean(b) / statistics.mean(a)
            for a, b in zip(took[with_it], took[without], strict=True)
        ]
        print(
            f"  {without} / {with_it}: {', '.join(f'{v:.2f}' for v in ratios)};"
            f" median {statistics.median(ratios):.2f}; {with_it} faster in"
            f" {sum(v > 1 for v in ratios)}/{len(ratios)}",
            flush=True,
        )
    if threads[True]:
        on, off = threads[True], threads[False]
        print(
            f"  8 library threads, writes/s: queued {', '.join(f'{v:.0f}' for v in on)};"
            f" unqueued {', '.join(f'{v:.0f}' for v in off)}; queued higher in"
            f" {sum(a > b for a, b in zip(on, off, strict=True))}/{len(on)}",
            flush=True,
        )


def _serve_main(off: str, argv: list[str]) -> int:
    """Run ``palimpsest serve`` with ``off`` turned off in this process."""
    _turn_off(off)
    from palimpsest.api.cli import main as cli

    return cli(["serve", *argv, "--workers", "1"])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        sys.exit(_serve_main(sys.argv[2], sys.argv[3:]))
    main()
