"""The event stream as an iterator: a connection cut mid-stream is resumed after the
last event received (nothing lost, nothing repeated), and leaving the loop closes
the stream, so a token never runs out of its 20 streams."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2

from palimpsest.api.client import Client
from tests.conftest import Tenant

KEPT_BYTES = 700
"""How much of the first stream the cut lets through: a couple of events."""


class _CutStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream) -> None:
        self._inner = inner

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self._inner:
            if sent + len(chunk) > KEPT_BYTES:
                yield chunk[: KEPT_BYTES - sent]
                raise httpx2.ReadError("connection reset mid-stream")
            sent += len(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _CutFirstStream(httpx2.HTTPTransport):
    """Cuts the first event stream after ``KEPT_BYTES``."""

    def __init__(self) -> None:
        super().__init__()
        self.streams: list[httpx2.URL] = []

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = super().handle_request(request)
        if request.url.path.endswith("/stream"):
            self.streams.append(request.url)
            if len(self.streams) == 1:
                assert isinstance(response.stream, httpx2.SyncByteStream)
                return httpx2.Response(
                    response.status_code,
                    headers=response.headers,
                    stream=_CutStream(response.stream),
                    request=request,
                )
        return response


def _write_some(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.token("writer")) as client:
        for n in range(4):
            client.create_memory(f"event source {n}", type="note", scope="s")


def test_a_cut_stream_resumes_after_the_last_event(base_url: str, tenant: Tenant) -> None:
    _write_some(base_url, tenant)
    transport = _CutFirstStream()
    with (
        httpx2.Client(transport=transport) as http,
        Client(base_url, token=tenant.admin.token, http_client=http) as client,
    ):
        expected = client.list_events(limit=12).events
        streamed = list(client.stream_events(limit=12))
    assert len(transport.streams) == 2  # cut once, resumed once
    assert [e.position for e in streamed] == [e.position for e in expected]
    resumed_after = int(transport.streams[1].params["after"])
    assert 0 < resumed_after < expected[-1].position


def test_leaving_the_loop_closes_the_stream(base_url: str, tenant: Tenant) -> None:
    with Client(base_url, token=tenant.token("reader")) as client:
        for _ in range(25):  # more than the 20 streams a token may hold open
            for event in client.stream_events():
                assert event.position > 0
                break
