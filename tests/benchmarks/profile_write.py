"""Profile single ``POST /v1/memories`` writes end to end, in the serving process only.

Usage::

    py-spy record --rate 500 --format raw -o /tmp/write.txt -- \\
        python tests/benchmarks/profile_write.py [--writes N] [--loop asyncio --http h11]
    python tests/benchmarks/profile_write.py --top /tmp/write.txt

The first form starts a fresh embedded PostgreSQL and the app under uvicorn in
this process, then drives ``N`` sequential writes from a child process (so the
client's own work is not in the profile). The second prints the functions that
hold the most samples, by own time and with their callees (the top of the
profile in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

_CLIENT = """
import sys, httpx2
port, token, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with httpx2.Client(base_url=f"http://127.0.0.1:{port}",
                   headers={"Authorization": f"Bearer {token}"}) as c:
    for i in range(n):
        c.post("/v1/memories", json={"type": "note", "scope": "bench", "content": f"n {i}"}
               ).raise_for_status()
"""


def _serve_and_drive(writes: int, loop: str, http: str) -> None:
    import uvicorn

    from palimpsest.api._settings import ApiSettings
    from palimpsest.api.app import create_app
    from palimpsest.projections.commands.tokens import create_tenant
    from palimpsest.projections.runtime import start_runtime
    from palimpsest.projections.store.settings import DatabaseSettings

    runtime = start_runtime(DatabaseSettings(data_dir=Path(tempfile.mkdtemp(prefix="pal-prof-"))))
    issued = create_tenant(runtime.log, "bench")
    app = create_app(ApiSettings(), runtime, wake=lambda: None)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", loop=loop, http=http)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    args = [sys.executable, "-c", _CLIENT, str(port), issued.token]
    subprocess.run([*args, "200"], check=True)  # warm up
    started = time.perf_counter()
    subprocess.run([*args, str(writes)], check=True)
    elapsed = time.perf_counter() - started
    print(f"{writes} writes in {elapsed:.2f} s: {1000 * elapsed / writes:.2f} ms each", flush=True)
    server.should_exit = True
    thread.join(timeout=10)
    runtime.close()


_REQUEST_FRAMES = ("RequestResponseCycle.run_asgi", "WorkerThread.run")
_IDLE_FRAMES = ("EpollSelector.select", "Condition.wait", "Queue.get")
"""Leaves of a thread with nothing to do (waiting for the database is counted)."""


def _top(path: Path, lines: int = 25) -> None:
    """Print the functions with the most samples in py-spy's raw (collapsed) output,
    counting only the server's request work (the event loop's request cycles and
    the worker threads), never a thread waiting for work."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any(f.startswith(_REQUEST_FRAMES) for f in frames) or frames[-1].startswith(
            _IDLE_FRAMES
        ):
            continue
        n = int(count)
        samples += n
        names = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0] for f in frames]
        own[names[-1]] += n
        for name in set(names):
            total[name] += n
    waits = own["Connection.wait (psycopg/connection.py"]
    print(f"{samples} samples in request handling, {waits} of them waiting for PostgreSQL")
    print("\nby own time:")
    for name, n in own.most_common(lines):
        print(f"{100 * n / samples:5.1f}%  {name}")
    print("\nwith callees:")
    for name, n in total.most_common(lines * 2):
        print(f"{100 * n / samples:5.1f}%  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=2000)
    parser.add_argument("--top", type=Path)
    parser.add_argument(
        "--loop", default="auto", help="uvicorn's event loop: auto, asyncio, uvloop"
    )
    parser.add_argument(
        "--http", default="auto", help="uvicorn's HTTP parser: auto, h11, httptools"
    )
    args = parser.parse_args()
    if args.top is not None:
        _top(args.top)
    else:
        _serve_and_drive(args.writes, args.loop, args.http)


if __name__ == "__main__":
    main()
