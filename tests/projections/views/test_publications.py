"""Publication notices wake exactly the waiters of the tenant that published."""

from __future__ import annotations

import asyncio
import time

from fastapi.testclient import TestClient

from projections.drains.revision import drain_revisions
from projections.runtime import Runtime
from projections.views.publications import PublicationWatch
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
