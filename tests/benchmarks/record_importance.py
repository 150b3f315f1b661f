"""Record the model importance scorer's requests against a real model server.

Runs ``llama_cpp.server`` with SmolLM2-135M-Instruct (the ``judge-local``
extra's model, as ``record_summariser.py`` does), asks
:class:`~palimpsest.projections.judgment.importance.OpenAICompatibleImportance` to rate
each of :data:`MEMORIES` through a recording proxy, and writes each request
with the server's real answer to ``tests/fixtures/importance/`` in the
judge's recording format. ``tests/projections/judgment/test_importance.py``
and the decay cycle's test replay them over loopback. Nobody writes a
recording by hand.

    .venv/bin/python -m tests.benchmarks.record_importance \\
        --python PYTHON_WITH_LLAMA_CPP --model GGUF
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from datetime import UTC, datetime
from pathlib import Path

from palimpsest.domain.importance import ImportanceInput
from palimpsest.projections.judgment.importance import OpenAICompatibleImportance
from tests.benchmarks.llama_server import MODEL_ALIAS, llama_server
from tests.benchmarks.record_judge import _Proxy

__all__ = ["MEMORIES", "MODEL", "RECORDINGS", "main"]

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "importance"
MODEL = MODEL_ALIAS
"""The model name the recordings ask for."""

MEMORIES = (
    ImportanceInput(
        "decision", "unsupported", False, text="We chose PostgreSQL over MySQL for the event log."
    ),
    ImportanceInput("event", "unsupported", False, text="Had coffee with Sam."),
    ImportanceInput(
        "blocker", "unsupported", False, text="Deploys fail until the TLS certificate is renewed."
    ),
    ImportanceInput("note", "unsupported", False, text="Thanks, you too!"),
)
"""The memories rated, as the decay cycle's test writes them (type, text; no evidence,
so graded ``unsupported``)."""

_N_CTX = 2048


def main() -> None:
    """Start the server, rate every memory through the recording proxy, print the ratings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--model", type=Path, required=True, help="the SmolLM2 GGUF file")
    args = parser.parse_args()
    meta = {
        "server": "llama_cpp.server",
        "model_file": args.model.name,
        "model_sha256": hashlib.sha256(args.model.read_bytes()).hexdigest(),
        "n_ctx": _N_CTX,
        "recorded_on": datetime.now(UTC).date().isoformat(),
    }
    RECORDINGS.mkdir(parents=True, exist_ok=True)
    with llama_server(n_ctx=_N_CTX, python=args.python, model=args.model) as url:
        proxy = _Proxy(url, RECORDINGS, meta)
        scorer = OpenAICompatibleImportance(proxy.url, MODEL, timeout_s=600, retries=0)
        for n, memory in enumerate(MEMORIES):
            proxy.batch, proxy.count = f"rate{n}", 0
            value = scorer.importance(memory)
            print(f"{memory.memory_type}: {value:.3f} ({memory.text})")
        print(f"fallbacks: {scorer.fallbacks}")
        proxy.server.shutdown()


if __name__ == "__main__":
    main()
