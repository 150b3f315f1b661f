"""The process's one HTTP client, over real loopback HTTP: pooled connections, failures
sorted once, and ``Retry-After`` read as seconds or as an HTTP date."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.domain.retry_after import retry_after_seconds
from palimpsest.projections.store.http_client import (
    HTTPCallError,
    close_client,
    get_json,
    post_json,
)

NOW = datetime(2026, 12, 6, 18, 0, 0, tzinfo=UTC)


@dataclass
class _Server:
    url: str
    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    connections: int = 0
    requests: int = 0


@pytest.fixture
def server() -> Iterator[_Server]:
    """A keep-alive HTTP/1.1 loopback server: answers ``answers`` in turn, then
    ``{"ok": true}``; counts the connections it accepted."""
    state = _Server("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            with lock:
                state.connections += 1

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                state.requests += 1
                status, headers, body = (
                    state.answers.pop(0) if state.answers else (200, {}, b'{"ok": true}')
                )
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    state.url = f"http://127.0.0.1:{httpd.server_port}"
    close_client()  # each test starts with no kept-alive connection
    yield state
    close_client()
    httpd.shutdown()
    httpd.server_close()


def test_consecutive_calls_share_one_connection(server: _Server) -> None:
    for _ in range(20):
        assert post_json(f"{server.url}/v1/embeddings", b"{}", timeout_s=5.0) == {"ok": True}
    assert server.requests == 20
    assert server.connections == 1


def test_threads_share_the_pool(server: _Server) -> None:
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda _: get_json(f"{server.url}/x", timeout_s=5.0), range(40)))
    assert answers == [{"ok": True}] * 40
    assert server.connections <= 4


def test_a_rate_limit_is_transient_and_says_when_to_come_back(server: _Server) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    server.answers.append((429, {"Retry-After": when}, b"slow down"))
    with pytest.raises(HTTPCallError) as failed:
        post_json(server.url, b"{}", timeout_s=5.0)
    assert failed.value.status == 429
    assert failed.value.transient
    assert failed.value.retry_after_s is not None and 27.0 < failed.value.retry_after_s <= 30.0


def test_a_refusal_is_final_and_keeps_its_problem_document(server: _Server) -> None:
    problem = {"type": "urn:palimpsest:problem:forbidden", "title": "Forbidden"}
    server.answers.append(
        (403, {"Content-Type": "application/problem+json"}, json.dumps(problem).encode())
    )
    with pytest.raises(HTTPCallError) as failed:
        post_json(server.url, b"{}", timeout_s=5.0, api_key="t")
    assert (failed.value.status, failed.value.transient) == (403, False)
    assert json.loads(failed.value.body)["type"] == problem["type"]
    # A 5xx is worth another attempt; an answer that is not JSON is not
    server.answers += [(503, {}, b""), (200, {}, b"<html>")]
    for transient in (True, False):
        with pytest.raises(HTTPCallError) as failed:
            post_json(server.url, b"{}", timeout_s=5.0)
        assert failed.value.transient is transient


def test_nobody_listening_is_transient_with_no_status() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(HTTPCallError) as failed:
        post_json(f"http://127.0.0.1:{port}/v1/embeddings", b"{}", timeout_s=2.0)
    assert failed.value.status is None
    assert failed.value.transient


# Retry-After: delta-seconds or an HTTP date, never negative, None when unreadable

_dates = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.replace(microsecond=0))


@given(seconds=st.integers(0, 10**9))
def test_delta_seconds_are_read_as_they_are(seconds: int) -> None:
    assert retry_after_seconds(str(seconds), NOW) == seconds
    assert retry_after_seconds(f"  {seconds} ", NOW) == seconds


@given(when=_dates)
def test_an_http_date_is_the_time_until_it_and_never_negative(when: datetime) -> None:
    got = retry_after_seconds(format_datetime(when, usegmt=True), NOW)
    assert got == max(0.0, (when - NOW).total_seconds())


@pytest.mark.parametrize("value", [None, "", "soon", "Sun, 99 Foo 2026 00:00:00 GMT"])
def test_an_unreadable_value_asks_for_nothing(value: str | None) -> None:
    assert retry_after_seconds(value, NOW) is None
