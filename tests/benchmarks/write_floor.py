"""Where one client's single write goes: the floors under ``POST /v1/memories``.

Usage: python tests/benchmarks/write_floor.py [--writes N] [--rounds R] [--fill M]
                                              [--drains-stopped]

Issue 16 asks one HTTP client's single writes for at least half raw psycopg's
rate. This measures, from one client thread, in one run and in rounds whose
order alternates (the machine's speed moves by 2x within minutes here, and
each kind then meets its fast and slow moments alike), the same kind of write
with one layer more at each step:

- ``raw``: the append benchmark's raw rows (its baseline), from this process;
- ``library``: one memory through ``Writer.write`` in this process (no HTTP);
- ``HTTP, nothing``: a bare ASGI app (:mod:`tests.benchmarks.bare_asgi`) under
  uvicorn with httptools and uvloop, as ``serve`` runs, answering at once: the
  transport's floor, client included;
- ``HTTP + raw``: that app doing raw's rows on its event loop;
- ``HTTP + library``: that app calling ``Writer.write`` on its event loop (none
  of FastAPI, our middlewares, authentication per request, or our routes);
- ``serve``: ``palimpsest serve --workers 1`` with the drain process, the append
  benchmark's best configuration for one client.

Every HTTP kind goes through :class:`KeepAliveClient`, each write with content
of its own. The served drains run throughout, as in the append benchmark and
beside any service at work: the library's and the served writes give them
work, raw's rows do not. ``--drains-stopped`` stops them (``SIGSTOP``) while
measuring, for each kind's cost without the drains' work on the same cores.
It prints each kind's mean, p50 and p99 per write, its ratio to raw (raw's
mean over the kind's, the append benchmark's ratio of rates, overall and the
range of the rounds'), the time the bare app's kinds spent on their own work
inside the app, and what each layer adds.

It measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.tokens import IssuedToken, authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.eventlog import SERVING_GROUPS_AHEAD
from palimpsest.projections.store.settings import DatabaseSettings
from tests.api.cli.serving import free_port, serve_env, stop_serve
from tests.benchmarks.append import (
    QUIET,
    drained,
    percentile,
    raw_insert,
    raw_setup,
    start_benchmark_serve,
)
from tests.benchmarks.lean_http import KeepAliveClient
from tests.conftest import library_writer

BARE = {"HTTP, nothing": "nothing", "HTTP + raw": "raw", "HTTP + library": "library"}
"""The bare app's kinds, by the mode :mod:`tests.benchmarks.bare_asgi` runs."""


def _bare(
    mode: str, args: list[str], runtime: Runtime, started: list[subprocess.Popen[bytes]]
) -> str:
    """Start the bare app in ``mode`` (added to ``started`` at once, for the caller to
    stop whatever happens); return its base URL once it accepts connections."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.benchmarks.bare_asgi", mode, str(port), *args],
        cwd=Path(__file__).resolve().parents[2],
        env=serve_env(runtime, QUIET),
        start_new_session=True,
    )
    started.append(process)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            msg = f"the bare app ({mode}) exited with {process.returncode}"
            raise RuntimeError(msg)
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    msg = f"the bare app ({mode}) did not start"
    raise RuntimeError(msg)


def _drain_process(served: subprocess.Popen[bytes]) -> int:
    """The pid of ``served``'s drain process: its child that multiprocessing spawned."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if parent == served.pid and b"spawn_main" in command:
            return int(entry.name)
    msg = "serve's drain process was not found"
    raise RuntimeError(msg)


def _stop_between_transactions(runtime: Runtime, pid: int) -> int:
    """Stop process ``pid`` (``SIGSTOP``) at a moment when no session of the database
    but this one is running a statement or holds a transaction open: stopped inside a
    drain's pass, it would hold that transaction's locks and snapshot throughout.
    Return ``pid``."""
    busy = (
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
        " AND pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle'"
    )
    with runtime.database.owner_connection() as conn:
        conn.autocommit = True
        for _ in range(200):
            os.kill(pid, signal.SIGSTOP)
            row = conn.execute(busy).fetchone()
            if row is not None and row[0] == 0:
                return pid
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.05)
    msg = "the drain process never stopped between transactions"
    raise RuntimeError(msg)


def _fill(runtime: Runtime, memories: int) -> tuple[IssuedToken, Caller]:
    """A tenant of ``memories`` notes, written in batches of 100; its token and caller."""
    issued = create_tenant(runtime.log, "bench")
    caller = authenticate(runtime.log, issued.token)
    writer = library_writer(runtime)
    for start in range(0, memories, 100):
        specs = [
            MemorySpec("note", "bench", None, None, f"fill {start + j}", (), None, 1.0)
            for j in range(min(100, memories - start))
        ]
        writer.write(caller, specs, batch=True)
    return issued, caller


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=200, help="writes per kind a round")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--fill", type=int, default=3000, help="memories in the tenant first")
    parser.add_argument(
        "--drains-stopped",
        action="store_true",
        help="stop serve's drain process (SIGSTOP) while measuring: every kind without"
        " the drains' work beside it, which a service at work always has",
    )
    args = parser.parse_args()
    runtime = start_runtime(DatabaseSettings(data_dir=Path(tempfile.mkdtemp(prefix="pal-floor-"))))
    # As a serving process's runtime is set up (and the bare app's): one client's
    # writes never form groups, but the library's kind should not differ in this.
    runtime.log.group.ahead = SERVING_GROUPS_AHEAD
    bare: list[subprocess.Popen[bytes]] = []
    served: subprocess.Popen[bytes] | None = None
    stopped: int | None = None
    clients: list[KeepAliveClient] = []
    raw: psycopg.Connection[tuple[object, ...]] | None = None
    try:
        raw_setup(runtime)
        issued, caller = _fill(runtime, args.fill)
        writer = library_writer(runtime)
        schema, tenant = runtime.database.schema, str(issued.tenant_id)
        conninfo = make_conninfo(
            "",
            **{
                **runtime.database.owner_conninfo(),
                "user": runtime.database.app_user,
                "password": runtime.database.app_password,
            },
        )
        raw = psycopg.connect(conninfo)
        served, base = start_benchmark_serve(runtime, 1, {"PALIMPSEST_DRAIN_PROCESS": "1"})
        bases = {
            kind: _bare(mode, [conninfo, schema, tenant, issued.token], runtime, bare)
            for kind, mode in BARE.items()
        }
        bases["serve"] = base
        drained(runtime)
        headers = {"Authorization": f"Bearer {issued.token}"}

        def over_http(kind: str, client: KeepAliveClient) -> Callable[[int], object]:
            # Content of its own in every write: equal content shares one payload row,
            # and a write that finds it stored does less.
            return lambda i: client.json(
                "POST",
                "/v1/memories",
                {"type": "note", "scope": "bench", "content": f"{kind} {i} {uuid.uuid4()}"},
            )

        connection = raw
        kinds: dict[str, Callable[[int], object]] = {
            "raw": lambda i: raw_insert(connection, schema, tenant, 1),
            "library": lambda i: writer.write(
                caller,
                [MemorySpec("note", "bench", None, None, f"l {i} {uuid.uuid4()}", (), None, 1.0)],
                batch=False,
            ),
        }
        for kind, url in bases.items():
            clients.append(KeepAliveClient(url, headers))
            kinds[kind] = over_http(kind, clients[-1])
        for one in kinds.values():  # statements prepared, caches warm
            for i in range(100):
                one(i)
        if args.drains_stopped:
            drained(runtime)
            stopped = _stop_between_transactions(runtime, _drain_process(served))
        print(
            f"write floors: {args.rounds} rounds of {args.writes} writes a kind, one client,"
            f" a tenant of {args.fill} memories, the drains"
            f" {'stopped' if args.drains_stopped else 'running'}; mean ms a write, by round",
            flush=True,
        )
        _summary(*_rounds(kinds, args.rounds, args.writes))
    finally:
        for client in clients:
            client.close()
        for process in bare:
            with contextlib.suppress(ProcessLookupError):  # it exited (and was reaped)
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        if served is not None:
            stop_serve(served)
        if raw is not None:
            raw.close()
        runtime.close()


def _rounds(
    kinds: dict[str, Callable[[int], object]], rounds: int, writes: int
) -> tuple[dict[str, list[list[float]]], dict[str, list[float]]]:
    """Run ``writes`` of each kind a round, the kinds' order reversed every other round;
    return each kind's latencies by round, and the seconds the bare app's kinds said
    their work took inside the app."""
    took: dict[str, list[list[float]]] = {kind: [] for kind in kinds}
    inside: dict[str, list[float]] = {kind: [] for kind in BARE}
    for r in range(rounds):
        for kind in list(kinds) if r % 2 == 0 else list(reversed(kinds)):
            latencies = []
            for i in range(writes):
                started = time.perf_counter()
                answer = kinds[kind](r * writes + i)
                latencies.append(time.perf_counter() - started)
                if kind in inside and isinstance(answer, dict):
                    inside[kind].append(answer["took"])
            took[kind].append(latencies)
        print(
            f"  round {r}: "
            + "  ".join(f"{k} {1000 * statistics.mean(v[-1]):.2f}" for k, v in took.items()),
            flush=True,
        )
    return took, inside


def _summary(took: dict[str, list[list[float]]], inside: dict[str, list[float]]) -> None:
    """Print each kind's mean, p50, p99 and ratios to raw, then what each layer adds."""
    raw_means = [statistics.mean(r) for r in took["raw"]]
    means = {kind: statistics.mean(x for r in rounds for x in r) for kind, rounds in took.items()}
    print("\nkind                 mean ms  p50 ms  p99 ms  ratio to raw (overall; by round)")
    for kind, rounds in took.items():
        every = [x for r in rounds for x in r]
        ratios = [rm / statistics.mean(r) for rm, r in zip(raw_means, rounds, strict=True)]
        line = (
            f"{kind:<20} {1000 * means[kind]:7.2f} {1000 * statistics.median(every):7.2f}"
            f" {1000 * percentile(every, 0.99):7.2f}   {means['raw'] / means[kind]:4.2f}x;"
            f" {min(ratios):.2f}-{max(ratios):.2f}x"
        )
        if inside.get(kind) and kind != "HTTP, nothing":
            line += f"   (its work inside the app: {1000 * statistics.mean(inside[kind]):.2f} ms)"
        print(line, flush=True)
    partition = [
        ("raw's rows (raw)", None, "raw"),
        ("the library over raw, in process (library - raw)", "raw", "library"),
        ("HTTP and a second process (HTTP + library - library)", "library", "HTTP + library"),
        ("FastAPI and the API layer (serve - HTTP + library)", "HTTP + library", "serve"),
    ]
    print("\nserve's write, layer by layer, ms (means; these add up to serve's)")
    for label, below, above in partition:
        added = means[above] - (means[below] if below else 0.0)
        print(f"  {label:<55} {1000 * added:+6.2f}", flush=True)
    print(
        f"  for scale: the HTTP transport and client alone {1000 * means['HTTP, nothing']:.2f};"
        f" raw's rows behind it {1000 * (means['HTTP + raw'] - means['raw']):+.2f}",
        flush=True,
    )
    print(
        f"  0.5x raw allows {2000 * means['raw']:.2f} ms a served write; serve takes"
        f" {1000 * means['serve']:.2f}, the library alone {1000 * means['library']:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main()
