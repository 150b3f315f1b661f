"""The FastAPI application factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import Depends, FastAPI

import palimpsest
from palimpsest.api._admission import Admission, Caps
from palimpsest.api._candidate_budget import CandidateBudget
from palimpsest.api._edge import Edge
from palimpsest.api._metrics import Metrics
from palimpsest.api._problems import install_problem_handlers
from palimpsest.api._query_params import refuse_unknown_query
from palimpsest.api._sessions import Sessions
from palimpsest.api._settings import ApiSettings
from palimpsest.api.mcp._http import mount_mcp
from palimpsest.api.routers import (
    _admin as admin,
)
from palimpsest.api.routers import (
    _batch as batch,
)
from palimpsest.api.routers import (
    _contributions as contributions,
)
from palimpsest.api.routers import (
    _cycles as cycles,
)
from palimpsest.api.routers import (
    _decisions as decisions,
)
from palimpsest.api.routers import (
    _edges as edges,
)
from palimpsest.api.routers import (
    _erasures as erasures,
)
from palimpsest.api.routers import (
    _events as events,
)
from palimpsest.api.routers import (
    _forgetting as forgetting,
)
from palimpsest.api.routers import (
    _health as health,
)
from palimpsest.api.routers import (
    _landing as landing,
)
from palimpsest.api.routers import (
    _memories as memories,
)
from palimpsest.api.routers import (
    _observations as observations,
)
from palimpsest.api.routers import (
    _proposals as proposals,
)
from palimpsest.api.routers import (
    _proposers as proposers,
)
from palimpsest.api.routers import (
    _recall as recall,
)
from palimpsest.api.routers import (
    _review as review,
)
from palimpsest.api.routers import (
    _revision as revision,
)
from palimpsest.api.routers import (
    _tenant as tenant,
)
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.recall.query_vectors import query_vectors
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.publications import TenantWakers
from palimpsest.projections.views.revision_status import revision_totals

__all__ = [
    "create_app",
]

_PROBLEM = {"description": "A problem (RFC 9457)", "content": {"application/problem+json": {}}}
_GONE = {
    "description": "Gone (RFC 9457 problem): the tenant was deleted (`tenant-deleted`), or the "
    "content asked for expired (`content-expired`) or was erased (`content-erased`, naming "
    "the erasure)",
    "content": {"application/problem+json": {}},
}


def create_app(
    settings: ApiSettings,
    runtime: Runtime,
    wake: Callable[[], None] | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    drains_running: Callable[[], bool] | None = None,
) -> FastAPI:
    """Return the HTTP API over an open runtime (the caller owns its lifetime).

    ``wake`` is called after every write that committed: a hint for the
    drains (the in-process loop, or a broker message). Without one, no drain
    is known to run, so a write does not wait for its version's embedding.
    ``drains_running`` tells ``/readyz`` whether this process's drain loop
    runs (None: no loop here, the drains are external).

    There is no ``/docs`` page: Swagger UI and ReDoc load their scripts from
    a CDN, and the packaged copy of Swagger UI cannot render OpenAPI 3.1.
    ``/openapi.json`` is the reference (docs/api.md).
    """
    app = FastAPI(
        title="palimpsest",
        version=palimpsest.__version__,
        summary="Memory for LLM agents, with provenance, that forgets on purpose.",
        docs_url=None,
        redoc_url=None,
        responses={
            **{status: _PROBLEM for status in (400, 401, 403, 404, 409, 413, 422, 503)},
            410: _GONE,
        },
        dependencies=[Depends(refuse_unknown_query)],
    )
    app.state.runtime = runtime
    app.state.wake = wake or (lambda: None)
    app.state.drains = wake is not None
    app.state.drains_running = drains_running
    app.state.candidate_budget = CandidateBudget(settings.candidate_budget_ms / 1000)
    app.state.token_cache_s = settings.token_cache_s
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
    runtime.publications.start()  # reads that wait for revision await its notices
    app.state.metrics.watch_cache(lambda: asdict(runtime.version_cache.stats()))
    app.state.metrics.watch_query_vectors(lambda: query_vectors(runtime.embedder).figures())
    app.state.writes = TenantWakers()  # event streams await this process's writes, too
    app.state.admission = Admission(
        Caps(
            streams_per_token=settings.streams_per_token,
            streams_per_tenant=settings.streams_per_tenant,
            waits_per_token=settings.waits_per_token,
            waits_per_tenant=settings.waits_per_tenant,
        )
    )
    app.state.metrics.watch_admission(app.state.admission.open, app.state.admission.refused)
    app.state.review_sessions = Sessions()  # the review page's sign-ins (api/_sessions.py)
    install_problem_handlers(app)
    _publish_parameters_without_null(app)
    _publish_retention_maxima(app, settings)
    for module in (
        observations,
        memories,
        contributions,
        edges,
        proposers,
        proposals,
        forgetting,
        cycles,
        decisions,
        events,
        batch,
        recall,
        revision,
        admin,
        tenant,
        erasures,
        health,
        landing,
        review,
    ):
        app.include_router(module.router)
    mount_mcp(app, settings.host)  # /mcp: the MCP tools, authenticated by bearer token
    # Our one layer (api/_edge.py): nosniff on every answer, errors included; metrics
    # and the body size limit; writes announced to event streams; strict JSON bodies.
    app.add_middleware(
        Edge,
        metrics=app.state.metrics,
        max_request_bytes=settings.max_request_bytes,
        writes=app.state.writes,
    )
    return app


def _publish_retention_maxima(app: FastAPI, settings: ApiSettings) -> None:
    """Publish the deployment's retention maxima as the ``maximum`` of each
    ``RetentionUpdate`` field: they are settings, not constants, so the
    request model cannot declare them, and a client must see the bound it is
    held to (a value above it answers 422)."""
    build = app.openapi
    maxima = {
        "raw_hours": settings.raw_retention_hours,
        "transient_hours": settings.transient_retention_hours,
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            schema = document.get("components", {}).get("schemas", {}).get("RetentionUpdate", {})
            for name, maximum in maxima.items():
                field = schema.get("properties", {}).get(name, {})
                for kind in [field, *field.get("anyOf", [])]:
                    if kind.get("type") == "integer":
                        kind["maximum"] = maximum
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]


def _publish_parameters_without_null(app: FastAPI) -> None:
    """Publish optional query and header parameters without ``null``.

    FastAPI documents ``x: int | None = None`` as ``anyOf: [integer, null]``,
    but HTTP has no null query or header value: an absent parameter is the
    None. A client (or a fuzzer) reading the document would otherwise send
    the text ``null`` and be refused.
    """
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            for item in document.get("paths", {}).values():
                for operation in item.values():
                    for parameter in operation.get("parameters", []):
                        schema = parameter.get("schema", {})
                        kinds = [k for k in schema.get("anyOf", []) if k != {"type": "null"}]
                        if len(kinds) == 1 and len(schema["anyOf"]) == 2:
                            rest = {k: v for k, v in schema.items() if k != "anyOf"}
                            parameter["schema"] = {**kinds[0], **rest}
        return app.openapi_schema or build()

    app.openapi = openapi  # type: ignore[method-assign]
