"""Read your writes: a recall right after a write finds it, and what the wait costs.

Usage: python tests/benchmarks/read_your_writes.py [--trials 200] [--before 60] [--type fact]

One process as ``palimpsest serve`` runs (embedded PostgreSQL, the model loaded,
the drains in a background loop woken by every write), the app driven through
its ASGI interface (``TestClient``). Each trial writes one new memory
(``POST /v1/memories``, a distinct generated sentence) and recalls its exact
text at once (``POST /v1/recall``), cycling through the modes hybrid, vector and
text:

- **before** (measured first): the recall without ``after``, as recall answered
  until now: how often the memory is found on that first recall;
- **after**: the recall with ``after`` set to the ``position`` the write answered:
  how often the memory is found (first, ``current``, with its content) on that
  first recall, its latency, and, as the baseline in the same trial, the same
  recall sent again at once (caught up by then: it does not wait). The added
  latency is the difference, per trial; ``Server-Timing``'s ``wait`` is the time
  spent waiting for the drains.

The wait's bound is ``projections/recall/caught_up.py:WAIT_S`` (5 s). It
measures and prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.recall.caught_up import WAIT_S
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.settings import DatabaseSettings
from tests.benchmarks.sentences import sentences

MODES = ("hybrid", "vector", "text")


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):.1f} / p99 {p99:.1f} ms"


def _wait_ms(response: Any) -> float:
    """The ``wait`` part of ``Server-Timing`` (0 when absent)."""
    for part in response.headers.get("server-timing", "").split(","):
        name, _, value = part.strip().partition(";dur=")
        if name == "wait":
            return float(value)
    return 0.0


def _found(response: Any, memory_id: str, content: str) -> bool:
    items = response.json()["items"]
    return bool(items) and (items[0]["id"], items[0]["status"], items[0].get("content")) == (
        memory_id,
        "current",
        content,
    )


@dataclass
class Trials:
    """Writes and recalls through one app, and what they measured."""

    client: TestClient
    headers: dict[str, str]
    memory_type: str
    texts: Iterator[str]
    before: dict[str, list[int]] = field(default_factory=lambda: {m: [0, 0] for m in MODES})
    found: dict[str, list[int]] = field(default_factory=lambda: {m: [0, 0] for m in MODES})
    first: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    again: list[float] = field(default_factory=list)
    added: list[float] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    caught: int = 0

    def write(self) -> tuple[str, str, int]:
        """Write a new memory; return its text, id and position."""
        text = next(self.texts)
        answer = self.client.post(
            "/v1/memories",
            json={"type": self.memory_type, "scope": "user", "content": text},
            headers=self.headers,
        ).json()
        return text, answer["id"], answer["position"]

    def ask(self, text: str, mode: str, after: int | None) -> tuple[Any, float]:
        """Recall ``text``; return the response and its latency (ms)."""
        body: dict[str, Any] = {"query": text, "k": 5, "mode": mode}
        if after is not None:
            body["after"] = after
        began = time.perf_counter()
        response = self.client.post("/v1/recall", json=body, headers=self.headers)
        return response, (time.perf_counter() - began) * 1000

    def without_after(self, mode: str) -> None:
        """One trial as recall answered before: no ``after``."""
        text, memory_id, _ = self.write()
        response, _ = self.ask(text, mode, None)
        self.before[mode][0] += _found(response, memory_id, text)
        self.before[mode][1] += 1
        time.sleep(0.3)  # let the drains finish before the next trial

    def with_after(self, mode: str) -> None:
        """One trial with ``after``, and its baseline: the same recall again at once."""
        text, memory_id, position = self.write()
        response, took = self.ask(text, mode, position)
        self.found[mode][0] += _found(response, memory_id, text)
        self.found[mode][1] += 1
        self.caught += response.json()["caught_up"] is True
        self.waits.append(_wait_ms(response))
        self.first[mode].append(took)
        _, baseline = self.ask(text, mode, position)
        self.again.append(baseline)
        self.added.append(took - baseline)

    def report(self, trials: int) -> None:
        """Print what the trials measured."""
        print(
            "found on the first recall, before (no after): "
            + ", ".join(f"{m} {f}/{n}" for m, (f, n) in self.before.items())
        )
        print(
            "found on the first recall, with after: "
            + ", ".join(f"{m} {f}/{n}" for m, (f, n) in self.found.items())
            + f"; caught_up true {self.caught}/{trials}"
        )
        everything = [t for values in self.first.values() for t in values]
        print(f"first recall with after: {_percentiles(everything)}")
        for mode in MODES:
            print(f"  {mode}: {_percentiles(self.first[mode])}")
        print(f"the same recall again at once (baseline, caught up): {_percentiles(self.again)}")
        print(f"added latency (first minus baseline, per trial): {_percentiles(self.added)}")
        print(f"Server-Timing wait: {_percentiles(self.waits)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--before", type=int, default=60, help="trials without after")
    parser.add_argument("--type", default="fact")
    args = parser.parse_args()
    texts = iter(sentences(args.trials + args.before + 10, seed=44))
    print(
        f"{args.before} trials without after, then {args.trials} with it; wait bound {WAIT_S} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as data_dir:
        runtime = start_runtime(DatabaseSettings(data_dir=Path(data_dir)))
        runtime.load_embedder()
        loop = DrainLoop(runtime.log, embedder=runtime.embedder)
        loop.start()
        headers = {"Authorization": f"Bearer {create_tenant(runtime.log, 'ryw').token}"}
        try:
            with TestClient(create_app(ApiSettings(), runtime, wake=loop.wake)) as client:
                trials = Trials(client, headers, args.type, texts)
                for _ in range(10):  # warm up: connections, prepared statements
                    text, _, position = trials.write()
                    trials.ask(text, "hybrid", position)
                for trial in range(args.before):
                    trials.without_after(MODES[trial % len(MODES)])
                for trial in range(args.trials):
                    trials.with_after(MODES[trial % len(MODES)])
        finally:
            loop.stop()
            runtime.close()
    trials.report(args.trials)


if __name__ == "__main__":
    main()
