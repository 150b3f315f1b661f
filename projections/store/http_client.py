"""The process's one HTTP client: to model servers (embedders, judges, summarisers,
importance scorers) and, from the CLI, to the service.

One pooled ``httpx2`` client per process, shared by every caller and thread, so
consecutive calls to one server reuse a kept-alive connection instead of paying a
TCP connect (and, over TLS, a handshake) each; docs/benchmarks.md has the figure.
A forked process (a dramatiq worker) opens its own pool: sockets are not shared
across a fork.

Every failure is one :class:`HTTPCallError`, sorted once: ``transient`` (no
answer, a timeout, 408, 429, 5xx: worth another attempt, after ``retry_after_s``
when the server said) or not (any other status, or an answer that is not JSON).
Retrying is the caller's business (the judge retries with backoff; the embedder
leaves it to the indexing drain's next pass).

This lives in ``store/`` because it is the one room every caller of a model may
import (recall, judgment, the CLI); it knows no feature. It reads
``Retry-After`` with the rule the Python client reads it with
(:mod:`palimpsest.domain.retry_after`).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from datetime import UTC, datetime
from typing import Any

import httpx2

from palimpsest.domain.retry_after import retry_after_seconds

__all__ = ["HTTPCallError", "close_client", "get_json", "post_json"]

_RETRYABLE = frozenset({408, 429})
_EXCERPT = 300
"""Characters of a refusal's body kept in its message."""


class HTTPCallError(Exception):
    """A call that failed: no answer, a refusal (a status other than 2xx), or no JSON."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        transient: bool,
        retry_after_s: float | None = None,
        body: bytes = b"",
    ) -> None:
        super().__init__(message)
        self.status = status
        """The HTTP status, or None when no answer came (or it was not JSON)."""
        self.transient = transient
        """Whether another attempt may succeed."""
        self.retry_after_s = retry_after_s
        """How long the server asked to wait before another (``Retry-After``)."""
        self.body = body
        """The refusal's body (a problem document, say), as sent."""


class _Pool:
    """This process's client, opened on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._client: httpx2.Client | None = None
        self._pid = 0

    def client(self) -> httpx2.Client:
        pid = os.getpid()
        with self._lock:
            if self._client is None or self._pid != pid:
                # A client inherited through fork holds the parent's sockets: leave it
                # unclosed (closing would shut the parent's) and open a pool of our own.
                self._client = httpx2.Client(
                    limits=httpx2.Limits(max_connections=64, max_keepalive_connections=16),
                    follow_redirects=False,
                )
                self._pid = pid
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
            own = self._pid == os.getpid()
        if client is not None and own:
            client.close()


_POOL = _Pool()
# Kept-alive sockets closed before the interpreter tears down, not found unclosed.
atexit.register(_POOL.close)


def close_client() -> None:
    """Close this process's pool (its kept-alive connections); the next call opens one."""
    _POOL.close()


def post_json(
    url: str,
    body: bytes,
    *,
    timeout_s: float,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST ``body`` (JSON bytes) to ``url`` through the shared pool and return the
    decoded JSON answer of a 2xx response.

    Raises:
        HTTPCallError: no answer (refused, reset, timed out, cut off), a status
            other than 2xx (with up to 300 characters of its body), or no JSON.
    """
    return _send("POST", url, body, timeout_s=timeout_s, api_key=api_key, headers=headers)


def get_json(
    url: str, *, timeout_s: float, api_key: str | None = None, headers: dict[str, str] | None = None
) -> Any:
    """GET ``url`` through the shared pool and return the decoded JSON answer of a 2xx
    response; fails as :func:`post_json` does."""
    return _send("GET", url, None, timeout_s=timeout_s, api_key=api_key, headers=headers)


def _send(
    method: str,
    url: str,
    body: bytes | None,
    *,
    timeout_s: float,
    api_key: str | None,
    headers: dict[str, str] | None,
) -> Any:
    sent = {"Content-Type": "application/json", **(headers or {})} if body else dict(headers or {})
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    try:
        response = _POOL.client().request(
            method, url, content=body, headers=sent, timeout=timeout_s
        )
    except httpx2.HTTPError as e:
        # Refused, reset, timed out, or cut off mid-body.
        raise HTTPCallError(f"{type(e).__name__}: {e}", transient=True) from e
    if not response.is_success:
        text = response.content[:_EXCERPT].decode("utf-8", "replace")
        status = response.status_code
        raise HTTPCallError(
            f"HTTP {status} {text}".strip(),
            status=status,
            transient=status in _RETRYABLE or status >= 500,
            retry_after_s=retry_after_seconds(
                response.headers.get("Retry-After"), datetime.now(UTC)
            ),
            body=response.content,
        )
    try:
        return json.loads(response.content)
    except ValueError as e:
        msg = f"answered with no JSON: {response.content[:_EXCERPT]!r}"
        raise HTTPCallError(msg, status=response.status_code, transient=False) from e
