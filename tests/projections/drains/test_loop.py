"""The in-process drain loop: each stage and each tenant fails alone, with backoff,
a log line and a metric; everyone else's work goes on."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.limits import MAX_BATCH_ITEMS
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.drains.isolation import Backoff
from palimpsest.projections.drains.loop import DrainLoop
from palimpsest.projections.drains.settings import DrainSettings
from palimpsest.projections.recall.indexing import unindexed_count
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import SNAPSHOTS_TABLE
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import (
    Tenant,
    drain_until_caught_up,
    fact_spec,
    index_until_caught_up,
    library_writer,
)

_LATER = timedelta(hours=2)


def _until(condition: Callable[[], bool], timeout_s: float = 60.0) -> bool:
    """Wait for ``condition`` (polled); return whether it came true in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _status(client: TestClient, memory_id: str, headers: dict[str, str]) -> str:
    return str(client.get(f"/v1/memories/{memory_id}", headers=headers).json()["status"])


def _failures(client: TestClient, stage: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(f'palimpsest_drain_failures_total{{stage="{stage}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def loops() -> Iterator[list[DrainLoop]]:
    started: list[DrainLoop] = []
    yield started
    for loop in started:
        loop.stop()


def test_a_drain_batch_above_the_erasure_limit_still_erases_and_never_stalls_revisions(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    loops: list[DrainLoop],
) -> None:
    # Given a tenant being deleted with more observations than one erasure may name
    headers = tenant.headers()
    for chunk in range(2):
        items = [
            {"op": "create_observation", "content": f"said {chunk}-{i}"}
            for i in range(MAX_BATCH_ITEMS // 2 + 1)
        ]
        assert post(client, "/v1/batch", {"items": items}, headers).status_code == 201
    token = client.delete("/v1/tenant", headers=headers).json()["confirmation_token"]
    deletion = client.delete(f"/v1/tenant?confirm={token}", headers=headers)
    assert deletion.status_code == 202, deletion.text
    # And a loop whose drain batch (PALIMPSEST_DRAIN_BATCH) is above that limit
    batch = DrainSettings(drain_batch=10_000).drain_batch  # the largest it accepts
    loop = DrainLoop(runtime.log, sweep_s=0.05, batch=batch)
    loops.append(loop)
    loop.start()
    # When another tenant writes
    theirs = remember(client, other_tenant.headers(), content="written during a deletion")
    # Then its memory is published, and the deletion completes
    assert _until(lambda: _status(client, theirs["id"], other_tenant.headers()) == "current")
    receipt = f"/v1/erasures/{deletion.json()['id']}"
    assert _until(lambda: client.get(receipt, headers=headers).json()["status"] == "completed")
    done = client.get(receipt, headers=headers).json()
    assert done["removed"]["observations"] == MAX_BATCH_ITEMS + 2


def test_an_indexing_backlog_never_holds_another_tenants_write_unpublished(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    loops: list[DrainLoop],
) -> None:
    # Given a tenant's import, published, that indexing takes many batches over
    caller = authenticate(runtime.log, tenant.admin.token)
    library_writer(runtime).write(
        caller, [fact_spec(f"imported note {n} of the archive") for n in range(300)], batch=True
    )
    drain_until_caught_up(runtime)
    index_until_caught_up(runtime, other_tenant.id)
    runtime.load_embedder()
    # And the loop indexing it, ten memories a batch
    loop = DrainLoop(runtime.log, sweep_s=0.05, batch=10, embedder=runtime.embedder)
    loops.append(loop)
    loop.start()
    assert _until(lambda: unindexed_count(runtime.log, tenant.id) < 290), "indexing never began"
    # When another tenant writes
    theirs = remember(client, other_tenant.headers(), content="written during an import")
    loop.wake()
    # Then its memory is published and indexed while the import is still being indexed
    # (once, the indexing stage repeated to the end of every backlog before the
    # revisions stage ran again: an hour's import held every tenant's writes pending)
    assert _until(
        lambda: (
            unindexed_count(runtime.log, other_tenant.id) == 0
            and (_status(client, theirs["id"], other_tenant.headers()) == "current")
        )
    )
    assert unindexed_count(runtime.log, tenant.id) > 0


def _poison_snapshot(runtime: Runtime, tenant: UUID, aggregate_id: str) -> Callable[[], None]:
    """Store an undecodable snapshot of ``aggregate_id`` (a corrupt row of the cache the
    repository reads first); return what removes it."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        conn.execute("SELECT set_config('palimpsest.tenant_id', %s, false)", (str(tenant),))
        conn.execute(
            f'INSERT INTO "{schema}"."{SNAPSHOTS_TABLE}"'
            " (tenant_id, originator_id, originator_version, topic, state)"
            " VALUES (%s, %s, 1, 'eventsourcing.domain:Snapshot', 'not json')",
            (tenant, aggregate_id),
        )
        conn.commit()

    def remove() -> None:
        with runtime.database.owner_connection() as conn:
            conn.execute("SELECT set_config('palimpsest.tenant_id', %s, false)", (str(tenant),))
            conn.execute(
                f'DELETE FROM "{schema}"."{SNAPSHOTS_TABLE}" WHERE originator_id = %s',
                (aggregate_id,),
            )
            conn.commit()

    return remove


def test_a_poisoned_tenant_fails_alone_with_backoff_a_log_line_and_a_metric(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    other_tenant: Tenant,
    loops: list[DrainLoop],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given two tenants with a one-hour retention, an observation each, two hours on
    poisoned, healthy = tenant.headers(), other_tenant.headers()
    for headers in (poisoned, healthy):
        assert client.put("/v1/tenant/retention", json={"raw_hours": 1}, headers=headers).is_success
    bad = observe(client, poisoned, "the poisoned tenant's words")
    good = observe(client, healthy, "the healthy tenant's words")
    # And the first tenant's observation cannot be loaded (a corrupt snapshot row)
    unpoison = _poison_snapshot(runtime, tenant.id, bad)
    later = datetime.now(UTC) + _LATER
    failures_before = _failures(client, "expiry")
    loop = DrainLoop(
        runtime.log, sweep_s=0.05, clock=lambda: later, backoff=Backoff(base_s=3600, max_s=3600)
    )
    loops.append(loop)
    try:
        with caplog.at_level(logging.ERROR, logger="palimpsest.projections.drains.isolation"):
            loop.start()
            # When the healthy tenant writes while the other fails in the expiry stage
            theirs = remember(client, healthy, content="still published")
            # Then its memory is published (a later stage) and its observation expires
            # (the same stage), pass after pass
            assert _until(lambda: _status(client, theirs["id"], healthy) == "current")
            assert _until(
                lambda: (
                    client.get(f"/v1/observations/{good}", headers=healthy).json().get("expired_at")
                    is not None
                    or client.get(f"/v1/observations/{good}/content", headers=healthy).status_code
                    == 410
                )
            )
            gone = client.get(f"/v1/observations/{good}/content", headers=healthy)
            assert gone.status_code == 410 and problem_slug(gone) == "content-expired"
            passes = loop.passes
            assert loop.wait_for_passes(passes + 5, timeout_s=60)
            # And the failure is one structured line (backed off: not retried every pass)
            lines = [
                r
                for r in caplog.records
                if r.getMessage() == "drain stage failed"
                and r.__dict__.get("tenant_id") == str(tenant.id)
            ]
            assert [(r.__dict__["stage"], r.__dict__["failures"]) for r in lines] == [("expiry", 1)]
            assert lines[0].__dict__["retry_in_s"] == 3600
            # And it is counted on /metrics
            assert _failures(client, "expiry") == failures_before + 1
    finally:
        loop.stop()
        unpoison()
    # Once the tenant is healthy again, a pass expires its observation too
    DrainLoop(runtime.log, clock=lambda: later).run_once()
    gone = client.get(f"/v1/observations/{bad}/content", headers=poisoned)
    assert gone.status_code == 410 and problem_slug(gone) == "content-expired"


def test_one_pass_expires_what_its_retention_stage_just_made_due(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given an observation kept 30 days, then a retention of one day set for its
    # tenant: its deadline moves only when the retention stage of a pass runs.
    headers = tenant.headers()
    obs = observe(client, headers, "words kept a day only")
    assert client.put("/v1/tenant/retention", json={"raw_hours": 24}, headers=headers).is_success
    # When one pass runs two days later (its clock), the retention stage moves the
    # deadline to the past, and the expiry stage after it in the same pass, which read
    # nothing due before the pass began, expires the words.
    later = datetime.now(UTC) + timedelta(days=2)
    DrainLoop(runtime.log, clock=lambda: later).run_once()
    gone = client.get(f"/v1/observations/{obs}/content", headers=headers)
    assert gone.status_code == 410 and problem_slug(gone) == "content-expired", gone.text
