"""Real PostgreSQL for every test outside domain/: a fresh database per run.

With no ``DATABASE_URL`` a pgserver data directory is made for the run; with
it, a fresh database is created on that server and dropped afterwards. If no
database can be had, tests skip locally with the reason and fail in CI.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.commands.tokens import IssuedToken, create_tenant, issue_token
from palimpsest.projections.commands.writer import CapturePolicy, MemorySpec, Writer
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.recall.indexing import index_pending
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.store.settings import DatabaseSettings
from palimpsest.projections.views.access_buffer import flush_accesses


@dataclass(frozen=True)
class RunDatabase:
    """How the run reaches its database: settings, and env for the CLI."""

    settings: DatabaseSettings
    env: dict[str, str]


def pytest_configure(config: pytest.Config) -> None:
    """Give each run a temporary directory of its own.

    pytest's default ``/tmp/pytest-of-<user>/pytest-<n>`` keeps only the last
    three runs and deletes older ones as a run starts, so two runs at once on
    one machine deleted each other's embedded PostgreSQL. ``--basetemp``
    still wins when given.
    """
    if config.option.basetemp is None:
        config.option.basetemp = tempfile.mkdtemp(prefix="palimpsest-tests-")
        config.stash[_OWN_BASETEMP] = config.option.basetemp


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``--numprocesses=auto`` (the default run's): a worker per core, at most four.

    Each worker starts its own embedded PostgreSQL (or database on ``DATABASE_URL``)
    and loads the embedding model, so beyond a few workers memory grows faster than
    the run shortens. ``-n 0`` runs in one process, as the slow step does.
    """
    return max(1, min(4, len(os.sched_getaffinity(0))))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove this run's own directory when it passed (kept for a failure's logs)."""
    own = session.config.stash.get(_OWN_BASETEMP, None)
    if own is not None and exitstatus == 0:
        shutil.rmtree(own, ignore_errors=True)


_OWN_BASETEMP = pytest.StashKey[str]()


def _unavailable(reason: str) -> Any:
    if os.environ.get("CI"):
        pytest.fail(f"database unavailable in CI: {reason}")
    pytest.skip(f"database unavailable: {reason}")


@contextmanager
def fresh_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunDatabase]:
    """A database of its own: an embedded data directory, or a new database on the
    ``DATABASE_URL`` server (dropped afterwards)."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        data_dir = tmp_path_factory.mktemp("embedded")
        yield RunDatabase(
            DatabaseSettings(data_dir=data_dir), {"PALIMPSEST_DATA_DIR": str(data_dir)}
        )
        return
    params = conninfo_to_dict(url)
    name = f"palimpsest_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.Error as e:
        _unavailable(str(e).strip())
    fresh = make_conninfo("", **{**params, "dbname": name})
    fresh_url = "postgresql://?" + "&".join(f"{k}={v}" for k, v in conninfo_to_dict(fresh).items())
    yield RunDatabase(DatabaseSettings(database_url=fresh_url), {"DATABASE_URL": fresh_url})
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def test_database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunDatabase]:
    with fresh_database(tmp_path_factory) as database:
        yield database


@pytest.fixture(scope="session")
def runtime(test_database: RunDatabase) -> Iterator[Runtime]:
    try:
        started = start_runtime(test_database.settings)
    except PalimpsestError as e:
        _unavailable(str(e))
    yield started
    started.close()


@pytest.fixture(scope="session")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(ApiSettings(), runtime)) as test_client:
        yield test_client


@dataclass(frozen=True)
class Tenant:
    """A fresh tenant with an admin token, and helpers to issue more tokens."""

    runtime: Runtime
    admin: IssuedToken

    @property
    def id(self) -> uuid.UUID:
        return self.admin.tenant_id

    def token(self, role: str, principal: str | None = None) -> str:
        name = principal or f"{role}-{uuid.uuid4().hex[:6]}"
        return issue_token(self.runtime.log, self.id, name, role).token

    def headers(self, role: str = "admin") -> dict[str, str]:
        token = self.admin.token if role == "admin" else self.token(role)
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def tenant(runtime: Runtime) -> Tenant:
    return Tenant(runtime, create_tenant(runtime.log, f"t-{uuid.uuid4().hex[:8]}"))


@pytest.fixture
def other_tenant(runtime: Runtime) -> Tenant:
    return Tenant(runtime, create_tenant(runtime.log, f"other-{uuid.uuid4().hex[:8]}"))


def store_snapshot(runtime: Runtime) -> dict[str, int]:
    """Return the log head and the row count of every table (as the owner, all tenants),
    with the access stamps this process buffered written first (as reads once wrote them)."""
    flush_accesses(runtime.log)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        head = conn.execute(
            f'SELECT coalesce(max(notification_id), 0) FROM "{schema}"."{EVENTS_TABLE}"'
        ).fetchone()
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            )
        ]
        counts = {
            t: conn.execute(f'SELECT count(*) FROM "{schema}"."{t}"').fetchone()[0]  # type: ignore[index]
            for t in tables
        }
    return {"log_head": head[0] if head else 0, **counts}


@pytest.fixture
def snapshot(runtime: Runtime) -> Any:
    return lambda: store_snapshot(runtime)


@pytest.fixture
def data_dir_of(test_database: RunDatabase) -> Path | None:
    return None if test_database.settings.database_url else test_database.settings.data_dir


def count_events(runtime: Runtime, tenant: Tenant, topic: str) -> int:
    """Return how many events of ``topic`` (e.g. ``ObservationExpired``) the tenant has."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}"."{EVENTS_TABLE}" WHERE tenant_id = %s AND topic = %s',
            (tenant.id, f"palimpsest:{topic}"),
        ).fetchone()
    return int(row[0]) if row else 0


def logged_version(runtime: Runtime, aggregate_id: object) -> int | None:
    """Return the version of the aggregate's last event in the log (None: it has none)."""
    return _last_in_log(runtime, aggregate_id, "originator_version")


def owner_rows(runtime: Runtime, query: str, *params: object) -> list[tuple[Any, ...]]:
    """Return the rows of ``query`` read as the owner (every tenant's rows), where
    ``{schema}`` names the store's schema, quoted."""
    with runtime.database.owner_connection() as conn:
        statement = query.replace("{schema}", f'"{runtime.database.schema}"')
        return conn.execute(statement, params).fetchall()


def waiting_for_the_events_table(runtime: Runtime) -> int:
    """How many backends wait for the events table's lock (one a test holds)."""
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
            (f'"{schema}"."{EVENTS_TABLE}"',),
        ).fetchone()
    return int(row[0]) if row else 0


def logged_position(runtime: Runtime, memory_id: object) -> int | None:
    """Return the log position of the memory's last event (None: it has none)."""
    return _last_in_log(runtime, memory_id, "notification_id")


def _last_in_log(runtime: Runtime, aggregate_id: object, column: str) -> int | None:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT max({column}) FROM "{schema}"."{EVENTS_TABLE}" WHERE originator_id = %s',
            (aggregate_id,),
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def index_until_caught_up(runtime: Runtime, tenant: uuid.UUID | None = None) -> int:
    """Drain revisions, then embed (real model) until recall has indexed everything
    (of ``tenant`` only, if given: the session's store holds every test's memories);
    return how many were embedded."""
    drain_until_caught_up(runtime)
    embedded = 0
    only = None if tenant is None else (lambda: [tenant])
    while True:
        report = index_pending(runtime.log, runtime.embedder, tenants=only)
        if not (report.embedded or report.marked):
            return embedded
        embedded += report.embedded


def library_writer(runtime: Runtime) -> Writer:
    """The write path below the API, as a test calls it: 30 days of raw retention,
    an hour of transient, the wall clock."""
    return Writer(
        runtime.log,
        CapturePolicy(timedelta(days=30), timedelta(hours=1)),
        lambda: datetime.now(UTC),
    )


def fact_spec(content: str) -> MemorySpec:
    """A new fact of the user's scope, as the write path's tests write one."""
    return MemorySpec("fact", "user", None, None, content, (), None, 1.0)


def drain_until_caught_up(runtime: Runtime) -> int:
    """Run drain passes until nothing is left to claim; return how many were published."""
    published = 0
    while (report := drain_revisions(runtime.log)).claimed:
        published += report.published
    return published


def wait_until(
    condition: Callable[[], bool], timeout_s: float, what: str, *, poll_s: float = 0.05
) -> None:
    """Poll ``condition`` until it holds, failing the test (naming ``what``) after
    ``timeout_s``: what a test waits for is observed, never assumed from a sleep."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting until {what}")
        time.sleep(poll_s)


async def wait_until_async(
    condition: Callable[[], bool], timeout_s: float, what: str, *, poll_s: float = 0.02
) -> None:
    """:func:`wait_until` for a test running on an event loop (it yields the loop
    between polls, so the tasks it waits for can run)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting until {what}")
        await asyncio.sleep(poll_s)
