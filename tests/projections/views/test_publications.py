"""Publication notices wake exactly the waiters of the tenant that published."""

from __future__ import annotations

import asyncio
import time

from fastapi.testclient import TestClient

from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.views.publications import PublicationWatch
from tests.api.helpers import remember
from tests.conftest import Tenant


def test_a_publication_wakes_its_tenants_waiters_and_no_others(
    runtime: Runtime, client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    watch = PublicationWatch(runtime.database)
    watch.start()
    try:
        assert watch.listening.wait(10), "the watch never listened"

        async def scenario() -> tuple[bool, float]:
            with (
                watch.subscribe(tenant.id) as mine,
                watch.subscribe(other_tenant.id) as theirs,
            ):
                assert watch.waiting() == 2
                remember(client, tenant.headers())  # pending until drained
                started = time.monotonic()
                await asyncio.to_thread(drain_revisions, runtime.log)
                await asyncio.wait_for(mine.wait(), 5)
                woke = time.monotonic() - started
                await asyncio.sleep(0.3)  # a stray notice would have arrived by now
                return theirs.is_set(), woke

        other_woken, woke_after = asyncio.run(scenario())
        assert watch.waiting() == 0
        assert not other_woken, "another tenant's waiter was woken"
        assert woke_after < 5
    finally:
        watch.stop()


def _terminate_listeners(runtime: Runtime) -> int:
    """End, from the server side, every connection listening for publications (as a
    restart or a network cut would); return how many."""
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE query LIKE 'LISTEN %%palimpsest_published_%%' AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_a_watch_that_lost_its_connection_wakes_every_waiter_once_it_listens_again(
    runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    # Given a watch listening, and waiters of two tenants
    watch = PublicationWatch(runtime.database)
    watch.start()
    try:
        assert watch.listening.wait(10), "the watch never listened"

        async def scenario() -> None:
            with (
                watch.subscribe(tenant.id) as mine,
                watch.subscribe(other_tenant.id) as theirs,
            ):
                # When its connection is cut (a notice sent now would be lost)
                assert await asyncio.to_thread(_terminate_listeners, runtime) >= 1
                # Then, once it listens again, every waiter is woken to check for itself
                await asyncio.wait_for(asyncio.gather(mine.wait(), theirs.wait()), 15)

        asyncio.run(scenario())
        assert watch.listening.is_set()
    finally:
        watch.stop()
