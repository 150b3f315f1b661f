"""An HTTP/1.1 keep-alive client that costs the benchmark's process as little as it can.

A benchmark of the server must not be bounded by its own client: httpx spends
1.3-1.5 ms of CPU per request here (measured 2026-12-03), more than the server's
share of a write, and its threads share the two cores and, in one process, an
interpreter lock with whatever else the benchmark runs. This client writes the
request line and headers itself and reads the answer by its ``content-length``
(every JSON answer of the service has one); it understands nothing else of HTTP.
"""

from __future__ import annotations

import json
import socket
from typing import Any

__all__ = ["KeepAliveClient", "ProtocolError", "RequestFailedError"]


class RequestFailedError(Exception):
    """Raised when the server answers with a status of 400 or more."""


class ProtocolError(Exception):
    """Raised for an answer this client cannot read safely (no status line, chunked,
    no ``content-length``): failing loudly, never reading the next answer wrong."""


class KeepAliveClient:
    """One connection to ``base`` (``http://host:port``), reused for every request;
    not thread-safe (one per client thread)."""

    def __init__(self, base: str, headers: dict[str, str]) -> None:
        host, _, port = base.removeprefix("http://").partition(":")
        self._sock = socket.create_connection((host, int(port)))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._file = self._sock.makefile("rb")
        self._head = f"host: {host}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """Send one request (``body`` as JSON, if any); return its status and body."""
        data = b"" if body is None else json.dumps(body).encode()
        self._sock.sendall(
            f"{method} {path} HTTP/1.1\r\n{self._head}content-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n".encode()
            + data
        )
        status_line = self._file.readline()
        if not status_line.startswith(b"HTTP/1.1 "):
            msg = f"{method} {path}: no HTTP/1.1 answer ({status_line[:80]!r})"
            raise ProtocolError(msg)
        length = None
        while (line := self._file.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
            elif name.lower() == b"transfer-encoding":
                # Read by length or not at all: the next answer would be misread.
                msg = f"{method} {path}: a chunked answer, which this client does not read"
                raise ProtocolError(msg)
        if length is None:
            msg = f"{method} {path}: an answer without content-length"
            raise ProtocolError(msg)
        return int(status_line[9:12]), self._file.read(length)

    def json(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request and return its JSON answer.

        Raises:
            RequestFailedError: the status was 400 or more.
        """
        status, answer = self.request(method, path, body)
        if status >= 400:
            msg = f"{method} {path}: {status} {answer[:200]!r}"
            raise RequestFailedError(msg)
        return json.loads(answer)

    def close(self) -> None:
        """Close the connection."""
        self._file.close()
        self._sock.close()
