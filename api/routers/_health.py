"""``/healthz``, ``/readyz`` and ``/metrics``: for operators and their monitoring.

``/healthz`` is liveness: the process answers HTTP (restart it when it does
not, or when it answers 503: ``serve`` could not start its embedded PostgreSQL
again). ``/readyz`` is readiness: the process can serve requests as fast as
it will once warm (send it traffic only when it is). A load balancer
routes by ``/readyz``; an orchestrator's liveness probe restarts by
``/healthz``, never by ``/readyz`` (a database outage would restart every
replica and fix nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from alembic.script import ScriptDirectory
from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg import sql
from pydantic import BaseModel

import palimpsest.projections.store.migrations
from palimpsest.api._deps import RuntimeDep
from palimpsest.api._problems import problem_response
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.drains.heartbeat import drain_progress
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.database import Database
from palimpsest.projections.store.tenancy import read_transaction

__all__ = [
    "Checks",
    "Liveness",
    "Readiness",
    "healthz",
    "metrics",
    "readyz",
    "router",
    "schema_revisions",
]

router = APIRouter(tags=["operations"])

Check = Literal["ok", "missing", "external", "stalled", "unknown"]


class Liveness(BaseModel):
    """The process answers."""

    status: Literal["ok"] = "ok"


class Checks(BaseModel):
    """Each condition of readiness: ``ok``, ``missing`` (not yet, or no longer),
    ``unknown`` (not checked: the database does not answer) or, for the drains,
    ``external`` (workers elsewhere, over a broker, that have completed a pass lately
    or have nothing to do) or ``stalled`` (work waits, and no worker has completed a
    pass for ``PALIMPSEST_DRAIN_STALL_S``)."""

    database: Check
    migrations: Check
    embedder: Check
    drains: Check

    def missing(self) -> list[str]:
        """The conditions not met, in order."""
        return [name for name, check in self if check not in {"ok", "external"}]


class Readiness(BaseModel):
    """Ready: every check is met."""

    status: Literal["ready"] = "ready"
    checks: Checks


_NOT_READY = {
    "description": "Not ready: `application/problem+json` of type "
    "`urn:palimpsest:problem:not-ready`, with the same `checks` and `missing`, "
    "the conditions that are not met",
    "content": {"application/problem+json": {}},
}


_NOT_ALIVE = {
    "description": "Not alive: `application/problem+json` of type "
    "`urn:palimpsest:problem:not-alive`: `serve` could not restart the embedded "
    "PostgreSQL it runs; restarting the service is the remedy",
    "content": {"application/problem+json": {}},
}


@router.get("/healthz", response_model=Liveness, responses={503: _NOT_ALIVE})
async def healthz(request: Request) -> Any:
    """Liveness: the process answers HTTP. It never waits on the database (a database
    outage is not fixed by restarting the service: route traffic by `/readyz`), with
    one exception: 503 `not-alive` once `serve` has given up restarting the embedded
    PostgreSQL it started, which only a restart of the service can bring back."""
    # On the event loop, never a worker thread: writes stuck on a database that stopped
    # answering can hold every thread, and a liveness probe must not queue behind them.
    alive: Callable[[], bool] | None = getattr(request.app.state, "liveness", None)
    if alive is None or alive():
        return Liveness()
    return problem_response(
        503,
        "not-alive",
        "Not alive",
        "the embedded PostgreSQL is down and could not be restarted",
        instance=request.url.path,
    )


@router.get("/readyz", response_model=Readiness, responses={503: _NOT_READY})
def readyz(request: Request, runtime: RuntimeDep) -> Any:
    """Readiness: 200 when the database answers, its schema is at this code's newest
    migration, the embedder has loaded (the first recall does not pay for it), and
    the drains run (this process's, `serve`'s drain process, or, in an HTTP process of
    `--workers N` with a drain process, whichever holds the drains' lock; `external` with a
    broker, unless work waits and no worker has completed a pass for
    `PALIMPSEST_DRAIN_STALL_S`: `stalled`).
    Otherwise 503 `not-ready`, naming what is missing. A load balancer routes by this."""
    drains: Callable[[], bool] | None = request.app.state.drains_running
    database = _database(runtime)
    checks = Checks(
        database=database,
        migrations=_migrations(runtime) if database == "ok" else "unknown",
        embedder="ok" if runtime.embedder_loaded.is_set() else "missing",
        drains=_external(request, runtime, database)
        if drains is None
        else ("ok" if drains() else "missing"),
    )
    missing = checks.missing()
    if not missing:
        return Readiness(checks=checks)
    return problem_response(
        503,
        "not-ready",
        "Not ready",
        f"not ready: {', '.join(missing)} missing",
        instance=request.url.path,
        extra={"checks": checks.model_dump(), "missing": missing},
        headers={"Retry-After": "1"},
    )


def _external(request: Request, runtime: Runtime, database: Check) -> Check:
    """The drains' check with a broker: ``stalled`` when work waits and no worker's
    heartbeat is recent (a pool that died); ``external`` otherwise, when the database
    does not answer (its own check says so), or in an app ``serve`` did not make (no
    ``drain_stall_s`` on its state: a library's app, whose drains are its own)."""
    bound_s: float | None = getattr(request.app.state, "drain_stall_s", None)
    if bound_s is None or database != "ok":
        return "external"
    try:
        progress = drain_progress(runtime.log.datastore)
    except Exception:  # the database went away since its check: that check says so
        return "external"
    return "stalled" if progress.stalled(bound_s) else "external"


def _database(runtime: Runtime) -> Check:
    try:
        with read_transaction(runtime.log.datastore) as curs:
            curs.execute("SELECT 1")
    except Exception:  # any driver or pool error means the same: not reachable
        return "missing"
    return "ok"


@lru_cache(maxsize=1)
def _head_revision() -> str | None:
    """The newest migration this code has (read from its scripts, once)."""
    scripts = Path(palimpsest.projections.store.migrations.__file__).resolve().parent
    return ScriptDirectory(str(scripts)).get_current_head()


def _migrations(runtime: Runtime) -> Check:
    try:
        at = schema_revisions(runtime.database)
    except PalimpsestError:  # unreachable
        return "missing"
    return "ok" if at == [_head_revision()] else "missing"


def schema_revisions(database: Database) -> list[str]:
    """Return the revisions Alembic records for ``database`` (one query as the owner,
    which can read Alembic's table; Alembic itself would log at every probe)."""
    with database.owner_connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT version_num FROM {}.alembic_version").format(
                sql.Identifier(database.schema)
            )
        ).fetchall()
    return sorted(str(row[0]) for row in rows)


@router.get("/metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Prometheus metrics in the text exposition format."""
    return Response(
        generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST
    )
