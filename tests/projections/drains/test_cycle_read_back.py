"""A recorded decay cycle reads back as the run answered it: ``GET /v1/cycles/{id}``
carries the run's ``held_back``, ``importance_fallbacks`` and ``consolidation``;
rebuild and verify reproduce them; and a cycle recorded before the log carried
them still reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.cycle import Cycle
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.history.rebuild import rebuild_tenant
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.eventlog import WriteContext
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up
from tests.projections.drains.test_decay_cycle import app_clock, cycle, set_policy

NOON = (datetime.now(UTC) + timedelta(days=400)).replace(hour=12, minute=0, second=0, microsecond=0)
RECORDED = ("held_back", "importance_fallbacks", "consolidation")


def _read(client: TestClient, tenant: Tenant, cycle_id: UUID) -> dict[str, Any]:
    response = client.get(f"/v1/cycles/{cycle_id}", headers=tenant.headers("reader"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_cycle_reads_back_what_the_run_answered_and_rebuild_reproduces_it(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    """Five stale notes prune past a guard of three (two held back); two near-identical
    facts read lately survive and are consolidated, their merge held back too (the
    day's allowance is spent)."""
    headers = tenant.headers("writer")
    for n in range(5):
        remember(client, headers, type="note", content=f"Idea number {n}: try option {n}.")
    kept = [
        remember(client, headers, type="fact", content=text)["id"]
        for text in (
            "The staging database runs on port 5433",
            "The staging database runs on port 5433.",
        )
    ]
    set_policy(
        client,
        tenant,
        prune_below=0.3,
        auto_archive_decayed=True,
        auto_apply_extractive_merges=True,
        merge_similarity_floor=0.5,
        duplicate_floor=1.0,
    )
    index_until_caught_up(runtime, tenant.id)
    with app_clock(client, NOON - timedelta(hours=1)):
        for memory_id in kept:
            assert client.get(f"/v1/memories/{memory_id}", headers=headers).status_code == 200
    guard = ProposalSettings(collapse_share=0.0, collapse_minimum=3)
    writer = Writer(runtime.log, CapturePolicy(timedelta(days=1), timedelta(days=1)), lambda: NOON)

    ran = cycle(client, runtime, tenant, NOON, guard=guard, writer=writer).as_dict()

    assert ran["held_back"] == 2 and len(ran["archived"]) == 3
    assert ran["consolidation"]["groups"] == 1, ran["consolidation"]
    drain_until_caught_up(runtime)
    read = _read(client, tenant, ran["cycle_id"])
    assert {k: read.get(k) for k in RECORDED} == {k: ran[k] for k in RECORDED}
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    rebuild_tenant(runtime.database, tenant.id)
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    assert {k: _read(client, tenant, ran["cycle_id"]).get(k) for k in RECORDED} == {
        k: ran[k] for k in RECORDED
    }


def test_a_cycle_recorded_before_the_new_fields_still_reads(
    client: TestClient, runtime: Runtime, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``CycleCompleted`` as the old code wrote it (no ``held_back``, no
    ``importance_fallbacks``, no ``CycleConsolidated``) reads, rebuilds and verifies;
    the unknown counts are absent rather than a made-up 0."""
    old = Cycle(
        id=uuid4(),
        tenant_id=tenant.id,
        snapshot_at=NOON,
        policy_version=0,
        counts={"keep": 0, "fade": 0, "prune": 0},
        by_type={},
        duplicates=[],
        faded=[],
        unfaded=[],
        proposals=[],
        archived=[],
        principal_id=uuid4(),
    )
    for pending in old.pending_events:
        del pending.__dict__["held_back"], pending.__dict__["importance_fallbacks"]
    # Version 1 of the event: what the code before these fields stored.
    monkeypatch.setattr(Cycle.Created, "class_version", 1)
    runtime.log.record([old], WriteContext(tenant_id=tenant.id))
    monkeypatch.undo()
    with runtime.database.owner_connection() as conn:
        [(state,)] = conn.execute(
            f'SELECT state FROM "{runtime.database.schema}".{EVENTS_TABLE}'
            " WHERE originator_id = %s",
            (old.id,),
        ).fetchall()
    assert b"held_back" not in bytes(state) and b"class_version" not in bytes(state)

    read = _read(client, tenant, old.id)

    assert read["counts"] == {"keep": 0, "fade": 0, "prune": 0}
    assert not set(RECORDED) & set(read)
    rebuild_tenant(runtime.database, tenant.id)
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    assert _read(client, tenant, old.id) == read
