"""Recorded judge: real responses of a real model server, replayed over loopback HTTP.

Each recording is one JSON file holding a request body exactly as
:class:`~palimpsest.projections.judgment._openai_compatible.OpenAICompatibleJudge` sent
it, the SHA-256 digest of its canonical form
(:func:`~palimpsest.projections.judgment._prompt.canonical_json`), and the status and
JSON body the server answered. ``tests/benchmarks/record_judge.py`` makes
them from ``llama_cpp.server``; nobody writes one by hand.

:class:`RecordingServer` serves them on ``127.0.0.1`` as an OpenAI-compatible
endpoint, and :class:`RecordedJudge` points the ordinary client at it, so the
client's request building, HTTP and answer reading all run as they do
against a live server. A request nobody recorded answers 404 with its
digest, which the client raises as :class:`JudgeUnavailableError`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from palimpsest.domain.errors import ConfigurationError
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._prompt import Constraint, canonical_json

if TYPE_CHECKING:
    from datetime import datetime
    from types import TracebackType

    from palimpsest.domain.judge_state import JSONValue, JudgeItem
    from palimpsest.domain.verdicts import Verdict
    from palimpsest.projections.judgment.judge import ItemFailure, JudgeUsage

__all__ = [
    "FORMAT",
    "RecordedJudge",
    "Recording",
    "RecordingServer",
    "load_recordings",
    "replay",
    "request_digest",
]

FORMAT = "palimpsest-judge-recording/1"
"""The ``format`` every recording file declares."""

_RERECORD = "re-record with tests/benchmarks/record_judge.py (docs/judge.md)"


def request_digest(body: JSONValue) -> str:
    """Return the SHA-256 hex digest of a request body's canonical JSON."""
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


@dataclass(frozen=True)
class Recording:
    """One request and the server's answer to it."""

    digest: str
    request: dict[str, Any]
    status: int
    body: Any
    """The server's JSON answer, as it sent it (parsed)."""
    path: Path


def load_recordings(directory: Path) -> dict[str, Recording]:
    """Return every recording in ``directory`` (its ``*.json`` files), by request digest.

    Raises:
        ConfigurationError: the directory is missing, a file is not a
            recording, or its digest does not match its request (it was edited).
    """
    if not directory.is_dir():
        msg = f"the judge recordings directory {directory} does not exist"
        raise ConfigurationError(msg)
    found: dict[str, Recording] = {}
    for path in sorted(directory.glob("*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("format") != FORMAT:
                msg = f"{path} is not a judge recording (format {FORMAT!r})"
                raise ConfigurationError(msg)
            recording = Recording(
                digest=str(document["digest"]),
                request=document["request"],
                status=int(document["response"]["status"]),
                body=document["response"]["body"],
                path=path,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            msg = f"{path} is not a readable judge recording: {e!r}"
            raise ConfigurationError(msg) from e
        if request_digest(recording.request) != recording.digest:
            msg = f"{path}: its request does not match its digest; {_RERECORD}"
            raise ConfigurationError(msg)
        found[recording.digest] = recording
    return found


def replay(recordings: Mapping[str, Recording], data: bytes) -> tuple[int, bytes]:
    """Return the status and body recorded for a request body, or 404 naming its digest."""
    try:
        digest = request_digest(json.loads(data))
    except ValueError:
        return 400, json.dumps({"error": {"message": "the request body is not JSON"}}).encode()
    recording = recordings.get(digest)
    if recording is None:
        message = f"no recording for request digest {digest}; {_RERECORD}"
        error = {"message": message, "type": "recording_missing", "digest": digest}
        return 404, json.dumps({"error": error}).encode()
    return recording.status, json.dumps(recording.body, ensure_ascii=False).encode()


class RecordingServer:
    """An OpenAI-compatible endpoint on loopback that answers from recordings."""

    def __init__(self, recordings: Mapping[str, Recording]) -> None:
        """Start serving ``recordings`` on ``127.0.0.1`` at a free port, on a daemon thread."""
        self.recordings = recordings
        self.served: list[str] = []
        """The digests of the requests answered from a recording, in order."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/v1/chat/completions":
                    status, body = 404, b'{"error":{"message":"unknown path"}}'
                else:
                    status, body = replay(outer.recordings, data)
                    if status not in {400, 404}:
                        outer.served.append(request_digest(json.loads(data)))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the client reports what matters

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll, so closing (which waits for the loop to notice) is quick.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="judge-recordings", daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        """The base URL to give a client (``http://127.0.0.1:<port>``)."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        """Return the running server."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop serving."""
        self.close()


class RecordedJudge:
    """The OpenAI-compatible judge, answered from recordings by a loopback server."""

    def __init__(
        self,
        recordings: Path,
        model: str | None = None,
        *,
        constraint: Constraint = "gbnf",
        logprobs: bool = True,
        max_items: int = 12,
        max_chars: int = 48_000,
    ) -> None:
        """Load ``recordings`` and start serving them.

        ``model`` defaults to the one model the recordings asked for; the
        other arguments must be those the recordings were made with, or the
        requests will not match.

        Raises:
            ConfigurationError: the recordings cannot be loaded, or ``model``
                is not given and they asked for more than one.
        """
        loaded = load_recordings(recordings)
        if model is None:
            models = sorted({str(r.request.get("model")) for r in loaded.values()})
            if len(models) != 1:
                msg = (
                    f"the recordings in {recordings} ask for models {models}; "
                    "set PALIMPSEST_JUDGE_MODEL to one of them"
                )
                raise ConfigurationError(msg)
            model = models[0]
        self._server = RecordingServer(loaded)
        self._client = OpenAICompatibleJudge(
            self._server.url,
            model,
            timeout_s=30.0,
            retries=0,
            constraint=constraint,
            logprobs=logprobs,
            max_items=max_items,
            max_chars=max_chars,
        )

    @property
    def model(self) -> str:
        """The model the recordings asked for."""
        return self._client.model

    @property
    def usage(self) -> JudgeUsage:
        """What the last :meth:`judge` call cost, as the recorded server reported it."""
        return self._client.usage

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        """Return the batches :meth:`judge` sends, each one request (see the client's)."""
        return self._client.batches(now, items)

    @property
    def server(self) -> RecordingServer:
        """The loopback server answering the client."""
        return self._server

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        """Return the recorded verdicts for ``items`` (see :class:`Judge`).

        Raises:
            JudgeUnavailableError: a request has no recording (the message
                names its digest).
        """
        return self._client.judge(now, items)

    def close(self) -> None:
        """Stop the loopback server."""
        self._server.close()

    def __enter__(self) -> Self:
        """Return the judge."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the loopback server."""
        self.close()
