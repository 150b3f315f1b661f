"""The HTTP embedder's per-call latency against a loopback server.

Usage: python tests/benchmarks/embedder_http.py [--calls 2000] [--rounds 5]

A keep-alive HTTP/1.1 server on 127.0.0.1 (the standard library's, one thread
per connection) answers ``POST /v1/embeddings`` with a fixed 384-dimension
vector; :class:`OpenAICompatibleEmbedder` embeds one short text per call,
``--calls`` calls a round, after 50 warm-up calls. Prints the median and 90th
percentile per call of each round, and the connections the server accepted
(``--calls`` from the baseline, none from the pooled client once warm). Each
round times, call by call in turn, the embedder's former path as the baseline
(``urllib.request.urlopen``, a connection per call, as before issue 47). What it
measures is the client's own cost and the connection's, not a model's. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from palimpsest.projections.recall.embedders import OpenAICompatibleEmbedder

_VECTOR = [0.05] * 384
_ANSWER = json.dumps({"data": [{"index": 0, "embedding": _VECTOR}]}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a model server (uvicorn, llama.cpp) does
    # Headers and body go out in two writes: with Nagle on, the second waits for the
    # client's delayed ACK (40 ms). uvicorn sets TCP_NODELAY too.
    disable_nagle_algorithm = True
    connections = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(_ANSWER)))
        self.end_headers()
        self.wfile.write(_ANSWER)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    embedder = OpenAICompatibleEmbedder(
        f"http://127.0.0.1:{server.server_port}", "bench", 384, timeout_s=5.0
    )
    url = f"http://127.0.0.1:{server.server_port}/v1/embeddings"

    def by_urllib(texts: list[str]) -> None:
        body = json.dumps({"model": "bench", "input": texts}).encode()
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=5.0) as response:
            json.loads(response.read())

    ways: dict[str, Callable[[list[str]], Any]] = {
        "urllib, a connection per call": by_urllib,
        "the pooled client": embedder.embed,
    }
    for call in ways.values():
        for _ in range(50):
            call(["warm up"])
    for n in range(args.rounds):
        # Interleaved call by call, so the machine's load falls on both alike.
        before = _Handler.connections
        times: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(args.calls):
            for name, call in ways.items():
                start = time.perf_counter()
                call(["The cat is called Miso."])
                times[name].append(time.perf_counter() - start)
        print(f"round {n + 1}: {_Handler.connections - before} connections")
        for name, took in times.items():
            took.sort()
            print(
                f"  {name}: median {statistics.median(took) * 1e6:.0f} us,"
                f" p90 {took[int(len(took) * 0.9)] * 1e6:.0f} us per call"
            )
    server.shutdown()


if __name__ == "__main__":
    main()
