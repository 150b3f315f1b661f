"""Poison events already in the log: text PostgreSQL cannot store, and memories the
projection cannot compute.

The API refuses both today, but a log is append-only and may hold them from
before (or from a writer below the API). Each event here is appended through
the library path (the domain's own event methods and ``EventLog.record``),
below the API's validation.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.api.cli import main
from palimpsest.domain.evidence import Excerpt
from palimpsest.domain.memory import Memory
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.history.replay import replay_beliefs
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.aggregates import load_aggregate
from palimpsest.projections.store.eventlog import WriteContext
from palimpsest.projections.store.storable import REPLACEMENT
from tests.api.helpers import observe, post, remember
from tests.conftest import RunDatabase, Tenant, drain_until_caught_up

NUL = "\u0000"


def _append(runtime: Runtime, tenant: Tenant, memory_id: str, change: Any) -> None:
    """Apply ``change`` to the memory and record its events, as a writer below the API."""
    memory = load_aggregate(runtime.log, tenant.id, UUID(memory_id), Memory, "memory")
    change(memory)
    runtime.log.record([memory], WriteContext(tenant_id=tenant.id))


def _read(client: TestClient, tenant: Tenant, memory_id: str, **params: Any) -> Any:
    response = client.get(f"/v1/memories/{memory_id}", headers=tenant.headers(), params=params)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.slow
def test_a_nul_in_a_logged_reason_is_replaced_and_the_memory_becomes_current(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    created = remember(client, tenant.headers(), scope="user")
    reason = f"ok{NUL}x"
    _append(
        runtime,
        tenant,
        created["id"],
        lambda m: m.forget(reason, decision_id=uuid4(), principal_id=uuid4()),
    )
    drain_until_caught_up(runtime)
    read = _read(client, tenant, created["id"])
    assert read["status"] == "current"
    archived = read["belief"]["labels"]["archived"]
    assert archived["reason"] == f"ok{REPLACEMENT}x"
    # An as-of read of the same position computes the same document
    as_of = _read(client, tenant, created["id"], at_position=read["revision"]["published"])
    assert as_of["belief"] == read["belief"]
    # The log keeps the original: history shows what was written
    history = client.get(f"/v1/memories/{created['id']}/history", headers=tenant.headers())
    assert json.dumps(reason)[1:-1] in history.text  # "ok\u0000x", escaped in JSON
    # Rebuild and verify agree with the drain, and with each other
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    rebuilt = rebuild(runtime.database, workers=0)
    assert rebuilt.tenants >= 1
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    assert _read(client, tenant, created["id"])["belief"] == read["belief"]
    [line] = [
        b
        for b in replay_beliefs(runtime, tenant=tenant.id, at_position=10**12)
        if b["memory_id"] == created["id"]
    ]
    assert line["belief"]["labels"]["archived"]["reason"] == f"ok{REPLACEMENT}x"


@pytest.mark.slow
def test_a_nul_in_a_logged_scope_and_model_id_is_stored_replaced(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # A memory created below the API with NUL in its scope, topic and proposer's model
    created = remember(client, tenant.headers())
    observation = observe(client, tenant.headers(), "the user said so")
    version_id = UUID(created["version_id"])

    def cite(memory: Memory) -> None:
        memory.add_contributions(
            version_id,
            (Excerpt(UUID(observation), 0, 8, "digest"),),
            principal_id=uuid4(),
            model_id=f"judge{NUL}1",
            trust=0.5,
        )

    _append(runtime, tenant, created["id"], cite)
    drain_until_caught_up(runtime)
    assert _read(client, tenant, created["id"])["status"] == "current"
    withdraw = client.post(
        f"/v1/proposers/model=judge{REPLACEMENT}1/withdraw",
        headers=tenant.headers(),
        params={"reason": "bad model"},
    )
    assert withdraw.status_code < 500, withdraw.text
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    rebuild(runtime.database, workers=0)
    assert verify(runtime.database, tenant=tenant.id).divergences == []


def _poison(runtime: Runtime, tenant: Tenant, client: TestClient, memory_id: str) -> None:
    """Add a contribution with a trust of 2 (outside [0, 1], refused by the API and the
    domain's command): the projection raises on it."""
    observation = observe(client, tenant.headers(), "a poisoned source")
    version_id = UUID(_read(client, tenant, memory_id)["belief"]["current_version_id"])

    def contribute(memory: Memory) -> None:
        memory._contribution_added(  # the event method: the command's checks refuse 2.0
            contribution_id=uuid4(),
            version_id=version_id,
            excerpt=Excerpt(UUID(observation), 0, 8, "digest").as_event_value(),
            proposer_id=uuid4(),
            model_id=None,
            trust=2.0,
            principal_id=uuid4(),
        )

    _append(runtime, tenant, memory_id, contribute)


def test_an_unprojectable_memory_is_quarantined_and_everything_else_drains(
    client: TestClient,
    tenant: Tenant,
    other_tenant: Tenant,
    runtime: Runtime,
    caplog: pytest.LogCaptureFixture,
) -> None:
    poisoned = remember(client, tenant.headers(), content="poisoned")
    drain_until_caught_up(runtime)
    _poison(runtime, tenant, client, poisoned["id"])
    # Other memories of the same tenant and of another tenant, dirty in the same batch
    neighbour = remember(client, tenant.headers(), content="a neighbour")
    stranger = remember(client, other_tenant.headers(), content="another tenant")
    with caplog.at_level(logging.ERROR, logger="palimpsest.projections.drains.revision"):
        report = drain_revisions(runtime.log)
        assert report.quarantined == 1
        for _ in range(5):  # later sweeps neither retry nor log it again
            assert drain_revisions(runtime.log).claimed == 0
    quarantined = [r for r in caplog.records if r.getMessage().startswith("memory quarantined")]
    assert len(quarantined) == 1
    assert _read(client, tenant, neighbour["id"])["status"] == "current"
    assert _read(client, other_tenant, stranger["id"])["status"] == "current"
    # The memory answers unprojectable with the error, at once even when asked to wait
    read = _read(client, tenant, poisoned["id"], wait=5)
    assert read["status"] == "unprojectable"
    assert read["revision"]["published"] < read["revision"]["requested"]
    assert read["error"].startswith("ValueError")
    assert "belief" not in read
    listed = client.get("/v1/memories", headers=tenant.headers()).json()["items"]
    assert {m["id"]: m["status"] for m in listed}[poisoned["id"]] == "unprojectable"
    as_of = _read(client, tenant, poisoned["id"], at_position=read["revision"]["requested"])
    assert as_of["status"] == "unprojectable"
    # Reported by the revision status, and counted on /metrics
    status = client.get("/v1/revision", headers=tenant.headers()).json()
    assert status["unprojectable_memories"] == 1
    assert status["dirty_memories"] == 0
    assert status["unprojectable"][0]["memory_id"] == poisoned["id"]
    metrics = client.get("/metrics").text
    assert 'palimpsest_revision{figure="unprojectable_memories"} 1.0' in metrics
    # A later write ends the quarantine: the drain tries again (and fails again here)
    post(client, f"/v1/memories/{poisoned['id']}/pin", {}, tenant.headers())
    assert drain_revisions(runtime.log).quarantined == 1
    assert _read(client, tenant, poisoned["id"])["status"] == "unprojectable"


@pytest.mark.slow
def test_verify_reports_an_unprojectable_memory_and_rebuild_quarantines_it(
    client: TestClient,
    tenant: Tenant,
    runtime: Runtime,
    test_database: RunDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    poisoned = remember(client, tenant.headers(), content="poisoned")
    fine = remember(client, tenant.headers(), content="fine")
    drain_until_caught_up(runtime)
    _poison(runtime, tenant, client, poisoned["id"])
    drain_until_caught_up(runtime)
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert main(["verify", "--tenant", str(tenant.id)]) == 0
    out, err = capsys.readouterr()
    [line] = [json.loads(line) for line in out.splitlines()]
    assert line["unprojectable"]["memory_id"] == poisoned["id"]
    assert "1 unprojectable, 0 divergences" in err
    assert main(["rebuild", "--workers", "1"]) == 0
    assert _read(client, tenant, fine["id"])["status"] == "current"
    # Rebuilt without its belief and quarantined as the drain would: not retried
    assert _read(client, tenant, poisoned["id"])["status"] == "unprojectable"
    assert drain_revisions(runtime.log).claimed == 0
    assert verify(runtime.database, tenant=tenant.id).divergences == []
