"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta

from fastapi import FastAPI

from api.metrics import Metrics, ObserveRequests
from api.problems import install_problem_handlers
from api.routers import (
    admin,
    batch,
    decisions,
    erasures,
    events,
    health,
    memories,
    observations,
    proposers,
    recall,
    revision,
    tenant,
)
from api.settings import ApiSettings
from projections.commands.writer import CapturePolicy, Writer
from projections.runtime import Runtime
from projections.views.revision_status import revision_totals

__all__ = [
    "create_app",
]

_PROBLEM = {"description": "A problem (RFC 9457)", "content": {"application/problem+json": {}}}


def create_app(
    settings: ApiSettings,
    runtime: Runtime,
    wake: Callable[[], None] | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> FastAPI:
    """Return the HTTP API over an open runtime (the caller owns its lifetime).

    ``wake`` is called after every write that committed: a hint for the
    drains (the in-process loop, or a broker message). Without one, no drain
    is known to run, so a write does not wait for its version's embedding.
    """
    app = FastAPI(
        title="palimpsest",
        version="0.1.0",
        summary="Memory for LLM agents, with provenance, that forgets on purpose.",
        responses={status: _PROBLEM for status in (400, 401, 403, 404, 409, 413, 422, 503)},
    )
    app.state.runtime = runtime
    app.state.wake = wake or (lambda: None)
    app.state.drains = wake is not None
    app.state.clock = clock
    app.state.writer = Writer(
        runtime.log,
        CapturePolicy(
            raw_retention=timedelta(hours=settings.raw_retention_hours),
            transient_retention=timedelta(hours=settings.transient_retention_hours),
        ),
        clock=clock,
    )
    app.state.metrics = Metrics()
    app.state.metrics.watch_revision(lambda: revision_totals(runtime.log))
    runtime.version_cache.resize(settings.cache_entries)
    app.state.metrics.watch_cache(lambda: asdict(runtime.version_cache.stats()))
    install_problem_handlers(app)
    for module in (
        observations,
        memories,
        proposers,
        decisions,
        events,
        batch,
        recall,
        revision,
        admin,
        tenant,
        erasures,
        health,
    ):
        app.include_router(module.router)
    app.add_middleware(
        ObserveRequests, metrics=app.state.metrics, max_request_bytes=settings.max_request_bytes
    )
    return app
