"""Review-page sign-ins live in the database: every process of a deployment sees them,
they end on time, and the table holds no token."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx2
import pytest
from fastapi.testclient import TestClient

from palimpsest.api._sessions import COOKIE, Sessions
from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime, start_runtime
from palimpsest.projections.store.database import open_database
from tests.api.cli.serving import start_serve, stop_serve
from tests.conftest import RunDatabase, Tenant


def _hidden(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found.group(1)


@pytest.fixture
def other_process(test_database: RunDatabase) -> Iterator[TestClient]:
    """A second app on the same database with a runtime of its own: what another
    process of ``serve --workers 2`` is."""
    second = start_runtime(test_database.settings)
    try:
        with TestClient(create_app(ApiSettings(), second), follow_redirects=False) as client:
            yield client
    finally:
        second.close()


def test_a_sign_in_on_one_process_holds_on_another(
    runtime: Runtime, tenant: Tenant, other_process: TestClient
) -> None:
    with TestClient(create_app(ApiSettings(), runtime), follow_redirects=False) as first:
        # Given a person signed in through the first process
        form = first.get("/review/sign-in")
        signed = first.post(
            "/review/sign-in",
            data={"csrf": _hidden(form.text), "token": tenant.token("writer")},
        )
        assert signed.status_code == 303
        cookie = first.cookies[COOKIE]
        csrf = _hidden(first.get("/review").text)
    # When the next requests reach the other process
    other_process.cookies.set(COOKIE, cookie, path="/review")
    listing = other_process.get("/review")
    # Then the page is theirs there too, the same form token holds, and signing out
    # there ends the session everywhere
    assert listing.status_code == 200, listing.headers.get("location")
    assert _hidden(listing.text) == csrf
    out = other_process.post("/review/sign-out", data={"csrf": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/review/sign-in"
    with TestClient(create_app(ApiSettings(), runtime), follow_redirects=False) as first:
        first.cookies.set(COOKIE, cookie, path="/review")
        assert first.get("/review").headers["location"] == "/review/sign-in"


@pytest.mark.slow
def test_serve_with_two_workers_keeps_a_person_signed_in(runtime: Runtime, tenant: Tenant) -> None:
    server, base = start_serve(runtime, "--workers", "2")
    try:
        # Given a person signed in through `serve --workers 2`
        with httpx2.Client(base_url=base, follow_redirects=False, timeout=30) as browser:
            form = browser.get("/review/sign-in")
            signed = browser.post(
                "/review/sign-in",
                data={"csrf": _hidden(form.text), "token": tenant.token("writer")},
            )
            assert signed.status_code == 303, signed.text
            cookie = browser.cookies[COOKIE]
        # When the next pages come over new connections, which the kernel hands to
        # either worker process
        statuses = [
            httpx2.get(f"{base}/review", cookies={COOKIE: cookie}, timeout=30).status_code
            for _ in range(24)
        ]
    finally:
        stop_serve(server)
    # Then every one is the page, never the sign-in form
    assert statuses == [200] * 24


def test_the_sessions_table_holds_no_token_and_no_cookie(
    runtime: Runtime, tenant: Tenant, test_database: RunDatabase
) -> None:
    token = tenant.token("reader")
    cookie, session = Sessions().start(runtime.log, tenant.id, token)
    database = open_database(test_database.settings)
    with database.owner_connection(autocommit=True) as conn:
        rows = conn.execute(
            f'SELECT * FROM "{database.schema}".review_sessions WHERE tenant_id = %s',
            (tenant.id,),
        ).fetchall()
    stored = repr(rows).encode()
    assert len(rows) == 1
    for secret in (token, cookie.split(".", 1)[1], session.csrf):
        assert secret.encode() not in stored and secret not in repr(rows)
    assert Sessions().get(runtime.log, cookie) == session  # yet the cookie opens it


def test_sessions_end_when_idle_or_too_old_and_the_oldest_goes_first(
    runtime: Runtime, tenant: Tenant
) -> None:
    log = runtime.log
    now = [1_000_000.0]
    sessions = Sessions(idle_s=10, lifetime_s=25, capacity=2, clock=lambda: now[0])
    first, _ = sessions.start(log, tenant.id, "token-1")
    assert sessions.get(log, first) is not None
    now[0] += 9
    assert sessions.get(log, first) is not None  # used: its idle time starts again
    now[0] += 9
    assert sessions.get(log, first) is not None
    now[0] += 8
    assert sessions.get(log, first) is None  # busy, but past its lifetime
    second, _ = sessions.start(log, tenant.id, "token-2")
    now[0] += 11
    assert sessions.get(log, second) is None  # idle too long
    a, _ = sessions.start(log, tenant.id, "a")
    now[0] += 1
    b, _ = sessions.start(log, tenant.id, "b")
    now[0] += 1
    c, _ = sessions.start(log, tenant.id, "c")
    assert sessions.get(log, a) is None and sessions.get(log, b) is not None
    assert sessions.get(log, c) is not None
    made_up = f"{tenant.id.hex}.{'x' * 43}"
    assert sessions.get(log, "") is None and sessions.get(log, "made-up") is None
    assert sessions.get(log, made_up) is None
    # A cookie naming another tenant opens nothing: the row is under its own tenant.
    assert sessions.get(log, f"{'0' * 32}.{b.split('.', 1)[1]}") is None
