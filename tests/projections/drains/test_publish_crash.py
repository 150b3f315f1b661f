"""A crash of PostgreSQL right after a publish: the publish, which does not wait for
the disk, may be lost; the acknowledged write it published never is, and no read
serves the belief from before that write.

The test runs its own embedded PostgreSQL (whatever ``DATABASE_URL`` says), slows
its WAL writer so that the publish's commit record is still in memory, and stops
it with ``pg_ctl -m immediate`` (no checkpoint, the WAL buffers lost), then
starts it again, which recovers from the WAL on disk.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import psycopg
import pytest
from eventsourcing.persistence import PersistenceError

from palimpsest.domain.errors import PalimpsestError
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import MemorySpec, VersionSpec
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.current_beliefs import (
    CurrentBelief,
    PendingBelief,
    current_belief,
)
from tests.conftest import drain_until_caught_up, library_writer
from tests.embedded_server import own_server, start, stop


@pytest.fixture
def own_runtime(tmp_path: Path) -> Iterator[Runtime]:
    with own_server(tmp_path, db_wait_s=2) as runtime:
        yield runtime


def _now() -> datetime:
    return datetime.now(UTC)


def _version_of(runtime: Runtime, tenant_id: UUID, memory_id: UUID) -> str | None:
    """The current version id, or None while pending; retried while the pool's
    connections, broken by the crash, are replaced."""
    deadline = time.monotonic() + 60
    while True:
        try:
            belief = current_belief(runtime.log, tenant_id, memory_id, now=_now)
            break
        except (PalimpsestError, PersistenceError, psycopg.Error):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert isinstance(belief, CurrentBelief | PendingBelief), belief
    if isinstance(belief, PendingBelief):
        return None
    return str(belief.belief["current_version_id"])


@pytest.mark.slow
def test_a_crash_after_a_publish_loses_no_acknowledged_write_and_serves_nothing_stale(
    own_runtime: Runtime,
) -> None:
    runtime = own_runtime
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        conn.execute("SELECT pg_reload_conf()")
    tenant = create_tenant(runtime.log, "crash")
    caller = authenticate(runtime.log, tenant.token)
    writer = library_writer(runtime)
    created = writer.write(
        caller,
        [MemorySpec("fact", "user", None, None, "lunch is at noon", (), None, 1.0)],
        batch=False,
    ).body
    memory_id = UUID(created["id"])
    drain_until_caught_up(runtime)
    assert _version_of(runtime, tenant.tenant_id, memory_id) == created["version_id"]

    corrected = writer.write(
        caller, [VersionSpec(memory_id, "lunch is at one", (), None, 1.0)], batch=False
    ).body
    assert drain_until_caught_up(runtime) == 1
    assert _version_of(runtime, tenant.tenant_id, memory_id) == corrected["version_id"]

    with runtime.database.owner_connection(autocommit=True) as conn:
        unflushed = conn.execute(
            "SELECT pg_current_wal_flush_lsn() < pg_current_wal_insert_lsn()"
        ).fetchone()
    assert unflushed == (True,), "the publish waited for the disk"
    stop(runtime, "immediate")
    start(runtime)

    # The correction was acknowledged: it is there. Its publish may be lost; then
    # the memory answers pending (never the version it corrected) until published.
    after_crash = _version_of(runtime, tenant.tenant_id, memory_id)
    assert after_crash in (corrected["version_id"], None)
    drain_until_caught_up(runtime)
    assert _version_of(runtime, tenant.tenant_id, memory_id) == corrected["version_id"]
