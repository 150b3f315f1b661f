"""``/healthz`` and ``/metrics``: for operators and their monitoring."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.deps import RuntimeDep
from domain.errors import PalimpsestError
from projections.store.errors import DatabaseUnavailableError

__all__ = [
    "healthz",
    "metrics",
    "router",
]

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz(runtime: RuntimeDep) -> dict[str, Any]:
    """Report whether the service can reach its database (503 when it cannot)."""
    try:
        with runtime.log.datastore.transaction(commit=False) as curs:
            curs.execute("SELECT 1")
    except Exception as e:
        if isinstance(e, PalimpsestError):
            raise
        msg = f"the database does not answer: {type(e).__name__}"
        raise DatabaseUnavailableError(msg) from e
    return {"status": "ok", "database": "ok"}


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics in the text exposition format."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
