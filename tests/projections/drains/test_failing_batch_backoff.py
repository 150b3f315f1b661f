"""A batch that keeps failing is retried after a growing wait, and logged once per
wait: its traceback once, then a short line with the count (issue 43, item 8)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import remember
from tests.conftest import Tenant


@pytest.fixture
def disk_full(runtime: Runtime, tenant: Tenant) -> Iterator[None]:
    """PostgreSQL fails every publish of the tenant's revisions as a full disk does
    (SQLSTATE 53100, raised by a trigger) until the test ends."""
    schema, name = runtime.database.schema, f"disk_full_{uuid.uuid4().hex[:8]}"
    with runtime.database.owner_connection() as conn:
        conn.execute(
            f'CREATE FUNCTION "{schema}".{name}() RETURNS trigger LANGUAGE plpgsql AS $$'
            f" BEGIN IF NEW.tenant_id = '{tenant.id}'::uuid THEN"
            " RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full';"
            " END IF; RETURN NEW; END $$"
        )
        conn.execute(
            f'CREATE TRIGGER {name} BEFORE UPDATE OF published ON "{schema}".revisions'
            f' FOR EACH ROW EXECUTE FUNCTION "{schema}".{name}()'
        )
        conn.commit()
    yield
    with runtime.database.owner_connection() as conn:
        conn.execute(f'DROP TRIGGER IF EXISTS {name} ON "{schema}".revisions')
        conn.execute(f'DROP FUNCTION IF EXISTS "{schema}".{name}()')
        conn.commit()


@pytest.mark.slow
def test_a_batch_that_keeps_failing_backs_off_growing_and_logs_once_per_step(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    disk_full: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a memory whose publish PostgreSQL refuses (a full disk), every time
    created = remember(client, tenant.headers(), content="never published while the disk is full")
    # When the loop drains for 4 s, sweeping every 50 ms, with a lease shorter than that
    # (the bug: each lease's expiry retried it at the backoff's first step), and a
    # backoff of 0.1 s doubling up to 0.8 s
    loop = DrainLoop(runtime.log, sweep_s=0.05, lease_s=0.3, backoff=Backoff(base_s=0.1, max_s=0.8))
    with caplog.at_level(logging.INFO, logger="palimpsest.projections.drains.isolation"):
        loop.start()
        try:
            time.sleep(4.0)
        finally:
            loop.stop()
    lines = [
        r
        for r in caplog.records
        if r.getMessage() == "drain stage failed" and r.__dict__["tenant_id"] == str(tenant.id)
    ]
    # Then the logged wait grows as docs/drains.md says: doubling, then at its bound
    waits = [r.__dict__["retry_in_s"] for r in lines]
    assert waits[:4] == [0.1, 0.2, 0.4, 0.8], waits
    assert set(waits[4:]) <= {0.8}
    assert [r.__dict__["failures"] for r in lines] == list(range(1, len(lines) + 1))
    # And it logs once per step: 0.1 + 0.2 + 0.4 = 0.7 s to reach the bound, then one
    # line each 0.8 s (a line per lease, or per sweep, would be 13 or 80 in 4 s)
    assert len(lines) <= 4 + 5, waits
    # And the traceback only once; each line after names the error in one short line
    assert lines[0].exc_info is not None
    assert all(r.exc_info is None for r in lines[1:])
    assert all("could not extend file" in r.__dict__["error"] for r in lines)
    assert all(len(r.__dict__["error"]) <= 200 for r in lines)
    # And the memory waits (pending), its work still in the database
    read = client.get(f"/v1/memories/{created['id']}", headers=tenant.headers()).json()
    assert read["status"] == "pending"
