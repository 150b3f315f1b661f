"""Read your writes through the clients: a write, then a recall of its exact text, through
the Python client, MCP and the LangGraph store, against a real ``palimpsest serve``.

Usage: python tests/benchmarks/read_your_writes_clients.py [--trials 200] [--modes hybrid,vector]

``palimpsest serve`` on a fresh embedded data directory, with the real local
embedding model (ready once ``/readyz`` answers: the model is loaded) and its own
drains, as a deployment runs it. Two tokens of its default tenant: the writer's,
and a baseline's that never writes. For each surface and recall mode, ``--trials``
writes each followed by a recall of its exact text by the writer, whose recall is
sent after its writes (the client and the LangGraph store send ``after`` by
themselves; MCP's ``recall`` waits for the session's writes on the server), and as
many writes each followed by the same recall by the baseline, whose recall waits
for nothing (a client or an MCP session that has not written), alternated trial by
trial so that both see the same machine. Each write is a ``note`` (an MCP
``remember`` of a note does not wait for its potential conflicts, so the recall is
the first thing to wait).

It prints, per surface and mode: how often the write was the recall's first item
(current, with its text) on that first recall, with ``after`` and without it, and
the recall's latency p50/p99 with and without, and the difference: what reading
your writes adds. It measures and prints; it asserts nothing. docs/benchmarks.md
holds the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx2
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from palimpsest.api.client import Client
from palimpsest.api.client._beliefs import RecalledCurrent, RecallMode
from palimpsest.api.client.langgraph_store import PalimpsestStore
from tests.api.cli.serving import free_port, stop_serve
from tests.benchmarks.sentences import sentences


@dataclass
class Figures:
    """One surface and mode's trials: found on the first recall, and recall latencies."""

    found_after: int = 0
    found_baseline: int = 0
    after_s: list[float] = field(default_factory=list)
    baseline_s: list[float] = field(default_factory=list)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _env(data_dir: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALIMPSEST_", "DATABASE_"))}
    return env | {"PALIMPSEST_DATA_DIR": data_dir}


def _serve(data_dir: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``palimpsest serve`` on ``data_dir``; return it and its URL once ready."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "palimpsest.api.cli", "serve", "--port", str(port)],
        env=_env(data_dir),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit("serve exited")
        try:
            if httpx2.get(f"{base}/readyz", timeout=2).status_code == 200:
                return process, base
        except httpx2.TransportError:
            pass
        time.sleep(0.5)
    stop_serve(process)
    sys.exit("serve was not ready within 300 s")


def _token(data_dir: str, principal: str) -> str:
    """A writer token of the default tenant, issued through the CLI."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "palimpsest.api.cli", "token", "create"),
            *("--tenant", "default", "--principal", principal, "--role", "writer"),
        ],
        env=_env(data_dir),
        capture_output=True,
        text=True,
        check=True,
    )
    return str(json.loads(done.stdout)["token"])


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    answer = call()
    return answer, time.perf_counter() - started


def _client_trials(
    base: str, tokens: tuple[str, str], mode: RecallMode, texts: list[str]
) -> Figures:
    figures = Figures()
    with Client(base, token=tokens[0]) as writer, Client(base, token=tokens[1]) as baseline:
        for n, text in enumerate(texts):
            reader, with_after = (writer, True) if n % 2 == 0 else (baseline, False)
            written = writer.create_memory(text, type="note", scope="client")
            found, seconds = _timed(lambda: reader.recall(text, mode=mode, k=5))  # noqa: B023
            first = found.items[0] if found.items else None
            hit = isinstance(first, RecalledCurrent) and (first.id, first.content) == (
                written.id,
                text,
            )
            _record(figures, with_after, hit, seconds)
    return figures


def _store_trials(
    base: str, tokens: tuple[str, str], mode: RecallMode, texts: list[str]
) -> Figures:
    figures = Figures()
    with Client(base, token=tokens[0]) as writer, Client(base, token=tokens[1]) as baseline:
        stores = PalimpsestStore(writer, mode=mode), PalimpsestStore(baseline, mode=mode)
        for n, text in enumerate(texts):
            with_after = n % 2 == 0
            reader = stores[0] if with_after else stores[1]
            value = {"text": text}
            stores[0].put(("bench", mode), f"k{n}", value)
            query = json.dumps(value, sort_keys=True)
            found, seconds = _timed(
                lambda: reader.search(("bench",), query=query, limit=1)  # noqa: B023
            )
            hit = [(i.key, i.value) for i in found] == [(f"k{n}", value)]
            _record(figures, with_after, hit, seconds)
    return figures


async def _mcp_trials(
    base: str, tokens: tuple[str, str], mode: RecallMode, texts: list[str]
) -> Figures:
    figures = Figures()
    url = base + "/mcp"

    def headers(token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async with (
        create_mcp_http_client(headers=headers(tokens[0])) as http_a,
        create_mcp_http_client(headers=headers(tokens[1])) as http_b,
        McpClient(streamable_http_client(url, http_client=http_a)) as writer,
        McpClient(streamable_http_client(url, http_client=http_b)) as baseline,
    ):

        async def call(session: McpClient, tool: str, **arguments: Any) -> dict[str, Any]:
            result = await session.call_tool(tool, arguments)
            assert not result.is_error, result.content
            return dict(result.structured_content or {})

        for n, text in enumerate(texts):
            reader, with_after = (writer, True) if n % 2 == 0 else (baseline, False)
            written = await call(writer, "remember", content=text, type="note", scope="mcp")
            started = time.perf_counter()
            found = await call(reader, "recall", query=text, mode=mode, k=5)
            seconds = time.perf_counter() - started
            first = found["items"][0] if found["items"] else {}
            hit = (first.get("id"), first.get("status"), first.get("content")) == (
                written["memory_id"],
                "current",
                text,
            )
            _record(figures, with_after, hit, seconds)
    return figures


def _record(figures: Figures, with_after: bool, hit: bool, seconds: float) -> None:
    if with_after:
        figures.found_after += hit
        figures.after_s.append(seconds)
    else:
        figures.found_baseline += hit
        figures.baseline_s.append(seconds)


def _line(surface: str, mode: str, figures: Figures) -> str:
    after = [s * 1000 for s in figures.after_s]
    base = [s * 1000 for s in figures.baseline_s]
    p50, p99 = (_pct(after, 0.5), _pct(base, 0.5)), (_pct(after, 0.99), _pct(base, 0.99))
    return (
        f"| {surface} | {mode} | {figures.found_after} of {len(after)}"
        f" | {figures.found_baseline} of {len(base)}"
        f" | {p50[0]:.1f} / {p99[0]:.1f} | {p50[1]:.1f} / {p99[1]:.1f}"
        f" | {p50[0] - p50[1]:+.1f} / {p99[0] - p99[1]:+.1f}"
        f" | {statistics.fmean(after):.1f} / {statistics.fmean(base):.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--modes", default="hybrid,vector")
    args = parser.parse_args()
    modes: list[RecallMode] = [m for m in ("hybrid", "vector") if m in args.modes.split(",")]
    surfaces: list[tuple[str, Callable[..., Figures | Awaitable[Figures]]]] = [
        ("client", _client_trials),
        ("MCP", _mcp_trials),
        ("LangGraph store", _store_trials),
    ]
    # Each trial writes text of its own; the baseline's trials as many again.
    texts = iter(sentences(2 * args.trials * len(modes) * len(surfaces), seed=44))
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as data_dir:
        process, base = _serve(data_dir)
        try:
            tokens = _token(data_dir, "bench-writer"), _token(data_dir, "bench-baseline")
            print(f"serve ready at {base}; load average {load:.2f}", file=sys.stderr)
            rows = []
            for surface, trials in surfaces:
                for mode in modes:
                    batch = [next(texts) for _ in range(2 * args.trials)]
                    started = time.monotonic()
                    ran = trials(base, tokens, mode, batch)
                    figures = asyncio.run(ran) if asyncio.iscoroutine(ran) else ran
                    assert isinstance(figures, Figures)
                    rows.append(_line(surface, mode, figures))
                    print(rows[-1], f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
        finally:
            stop_serve(process)
    print(
        f"\n{args.trials} trials with after and {args.trials} without, alternated, per row;"
        f" load average {load:.2f} at start, {os.getloadavg()[0]:.2f} at the end\n"
    )
    print(
        "| surface | mode | found first, after | found first, without"
        " | recall p50 / p99 after (ms) | p50 / p99 without (ms) | added p50 / p99 (ms)"
        " | mean after / without (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
