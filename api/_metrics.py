"""Prometheus metrics of one app instance, and what records them for each request.

:class:`palimpsest.api._edge.Edge` counts, times and logs every request
(:func:`record_request`) and holds each body to the size limit (:class:`BodySize`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.types import Message, Receive, Scope, Send

from palimpsest.api._problems import problem_response
from palimpsest.projections.drains.counters import (
    DRAIN_FAILURES,
    HINTS_UNSENT,
    JUDGE_REFUSED,
    JUDGE_USAGE,
    counts,
)
from palimpsest.projections.drains.judge_budget import OPERATION

__all__ = ["BodySize", "BodyTooLargeError", "Metrics", "record_request"]

_log = logging.getLogger("palimpsest.http")


class Metrics:
    """The app's own registry, so two apps in one process (tests) never collide."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "palimpsest_http_requests",
            "HTTP requests by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "palimpsest_http_request_duration_seconds",
            "HTTP request latency by route.",
            ["method", "route"],
            registry=self.registry,
        )
        self.registry.register(_BackgroundCollector())
        # Each label set's counter and histogram, looked up once: ``labels()`` takes a
        # lock and checks its values on every call. With the log line's fields gathered
        # only when logged, record_request fell from 6.9 to 2.6 µs at WARNING (issue 48).
        # Bounded as the labels are: methods and route templates are closed sets.
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def children(self, method: str, route: str, status: int) -> tuple[Counter, Histogram]:
        """Return the request counter and the latency histogram of one label set."""
        key = (method, route, status)
        found = self._children.get(key)
        if found is None:
            found = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
            self._children[key] = found
        return found

    def watch_revision(self, totals: Callable[[], dict[str, float]]) -> None:
        """Report ``palimpsest_revision{figure=...}`` from ``totals`` at each scrape, and
        ``palimpsest_drain_lag_seconds``: the age of the oldest work the drains have not
        published (``oldest_dirty_age_s``; 0 when they have caught up)."""
        self.registry.register(_RevisionCollector(totals))

    def watch_cache(self, figures: Callable[[], dict[str, float]]) -> None:
        """Report ``palimpsest_cache{figure=...}`` (entries, hits, misses…) at each scrape."""
        self.registry.register(
            _FiguresCollector(
                "palimpsest_cache", "The as-of version cache, in this process.", figures
            )
        )

    def watch_query_vectors(self, figures: Callable[[], dict[str, float]]) -> None:
        """Report ``palimpsest_query_vectors{figure=...}`` (entries, hits, misses) at
        each scrape: recall's remembered query embeddings, in this process."""
        self.registry.register(
            _FiguresCollector(
                "palimpsest_query_vectors",
                "Recall's remembered query embeddings, in this process.",
                figures,
            )
        )

    def watch_admission(
        self,
        held: Callable[[], Mapping[str, int]],
        refused: Callable[[], Mapping[tuple[str, str], int]],
    ) -> None:
        """Report ``palimpsest_open{kind=stream|wait}`` (held now) and
        ``palimpsest_concurrency_refusals_total{kind, scope=token|tenant}`` (429s)."""
        self.registry.register(_AdmissionCollector(held, refused))


class _FiguresCollector:
    """A gauge with one sample per named figure, read when Prometheus scrapes."""

    def __init__(self, name: str, documentation: str, figures: Callable[[], dict[str, float]]):
        self.name = name
        self.documentation = documentation
        self.figures = figures

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=["figure"])
        for figure, value in self.figures().items():
            family.add_metric([figure], value)
        yield family


class _RevisionCollector:
    """The revision figures and the drains' lag, from one reading of the totals."""

    def __init__(self, totals: Callable[[], dict[str, float]]) -> None:
        self.totals = totals

    def collect(self) -> Iterator[GaugeMetricFamily]:
        totals = self.totals()
        family = GaugeMetricFamily(
            "palimpsest_revision",
            "Revision figures over all tenants (as GET /v1/revision reports per tenant).",
            labels=["figure"],
        )
        for figure, value in totals.items():
            family.add_metric([figure], value)
        yield family
        yield GaugeMetricFamily(
            "palimpsest_drain_lag_seconds",
            "Age of the oldest write the drains have not published yet (0: caught up).",
            value=totals.get("oldest_dirty_age_s", 0.0),
        )


class _AdmissionCollector:
    """Open event streams and waits of this process, and the requests refused for
    exceeding a cap; every label comes from a closed set (:mod:`palimpsest.api._admission`)."""

    def __init__(
        self,
        held: Callable[[], Mapping[str, int]],
        refused: Callable[[], Mapping[tuple[str, str], int]],
    ) -> None:
        self.held = held
        self.refused = refused

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        held = GaugeMetricFamily(
            "palimpsest_open",
            "Event streams open and requests waiting for the drains, in this process.",
            labels=["kind"],
        )
        for kind, n in sorted(self.held().items()):
            held.add_metric([kind], n)
        yield held
        refused = CounterMetricFamily(
            "palimpsest_concurrency_refusals",
            "Streams and waits refused with 429, by the cap they hit (token or tenant).",
            labels=["kind", "scope"],
        )
        for (kind, scope), n in sorted(self.refused().items()):
            refused.add_metric([kind, scope], n)
        yield refused


class _BackgroundCollector:
    """The process's background failures (:mod:`palimpsest.projections.drains.counters`):
    drain stages that failed, by stage, and post-commit hints not sent, by queue."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        failures = CounterMetricFamily(
            "palimpsest_drain_failures",
            "Drain stage runs that failed (their work stays due and is retried with backoff).",
            labels=["stage"],
        )
        for stage, n in sorted(counts(DRAIN_FAILURES).items()):
            failures.add_metric([stage], n)
        yield failures
        unsent = CounterMetricFamily(
            "palimpsest_hints_unsent",
            "Wake-up hints not sent after a committed write (the broker failed).",
            labels=["queue"],
        )
        for queue, n in sorted(counts(HINTS_UNSENT).items()):
            unsent.add_metric([queue], n)
        yield unsent
        usage = CounterMetricFamily(
            "palimpsest_judge_usage",
            "What the forgetting pass's judge calls cost, as the servers reported it.",
            labels=["operation", "kind"],
        )
        for kind, n in sorted(counts(JUDGE_USAGE).items()):
            usage.add_metric([OPERATION, kind], n)
        yield usage
        refused = CounterMetricFamily(
            "palimpsest_judge_budget_refusals",
            "Judge calls a tenant's daily budget refused (the pass stopped instead).",
            labels=["operation"],
        )
        for operation, n in sorted(counts(JUDGE_REFUSED).items()):
            refused.add_metric([operation], n)
        yield refused


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Methods counted by name; any other is counted as ``other``."""


class BodyTooLargeError(Exception):
    """Raised by :meth:`BodySize.add` once a body has passed the limit."""


class BodySize:
    """The bytes of one request's body so far, against ``max_request_bytes``.

    The size is checked on the declared ``Content-Length`` (:meth:`declared_too_large`)
    and again on the bytes actually received (:meth:`add`), so a chunked upload
    cannot slip past it. Over the limit, the request is answered
    :meth:`too_large` (413), whatever the app made of the error.
    """

    __slots__ = ("exceeded", "limit", "received")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.received = 0
        self.exceeded = False

    def declared_too_large(self, scope: Scope) -> bool:
        """Return whether the request's ``Content-Length`` is over the limit."""
        declared = dict(scope.get("headers", [])).get(b"content-length")
        return declared is not None and declared.isdigit() and int(declared) > self.limit

    def add(self, message: Message) -> None:
        """Count a received message's body bytes.

        Raises:
            BodyTooLargeError: the body has passed the limit (:attr:`exceeded` is set).
        """
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.limit:
                self.exceeded = True
                raise BodyTooLargeError

    async def too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer 413 problem+json."""
        response = problem_response(
            413,
            "content-too-large",
            "Content too large",
            f"the request body exceeds {self.limit} bytes",
            instance=scope.get("path"),
        )
        await response(scope, receive, send)


def record_request(metrics: Metrics, scope: Scope, status: int, started: float) -> None:
    """Count, time (since ``started``, a :func:`time.perf_counter`) and log one answered
    HTTP request, unhandled errors included, by route template and status."""
    elapsed = time.perf_counter() - started
    route: Any = scope.get("route")
    template = getattr(route, "path", None) or "unmatched"
    # Label values come from closed sets: a client choosing the method
    # (any token is valid HTTP) must not grow /metrics without bound.
    raw = scope.get("method", "")
    method = raw if raw in _METHODS else "other"
    requests, latency = metrics.children(method, template, status)
    requests.inc()
    latency.observe(elapsed)
    if not _log.isEnabledFor(logging.INFO):
        return  # the line's fields are not even gathered (serve at WARNING logs none)
    state = scope.get("state") or {}
    _log.info(
        "http request",
        extra={
            "method": method,
            "path": scope.get("path"),
            "route": template,
            "status": status,
            "duration_ms": round(elapsed * 1000, 2),
            "tenant_id": state.get("tenant_id"),
        },
    )
