"""One bad event harms one memory, never the log (issue 43, items 6 and 7).

Rows are written straight into the events table (``tests/api/poison_rows.py``), as
an older release, a bad migration or a disk fault would leave them, with the mark
the write path would have made.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.drains.revision import drain_revisions
from palimpsest.projections.history.rebuild import rebuild_tenant
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, problem_slug, remember
from tests.api.poison_rows import KINDS, Kind, insert_event, insert_poison
from tests.conftest import RunDatabase, Tenant, drain_until_caught_up

UNPROJECTABLE = "memory-unprojectable"


def _poisoned(client: TestClient, tenant: Tenant, runtime: Runtime, kind: Kind) -> dict[str, Any]:
    """A memory with a poison event of ``kind`` appended, and a neighbour written after."""
    memory = remember(client, tenant.headers(), content=f"poisoned by {kind} {uuid4().hex}")
    drain_until_caught_up(runtime)
    position = insert_poison(runtime, tenant.id, UUID(memory["id"]), kind)
    neighbour = remember(client, tenant.headers(), content="written after the poison")
    drain_until_caught_up(runtime)
    return {"id": memory["id"], "position": position, "neighbour": neighbour["id"]}


@pytest.mark.parametrize("kind", KINDS)
def test_a_poison_event_quarantines_its_memory_and_nothing_else(
    kind: Kind, client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    h = tenant.headers()
    stranger = remember(client, other_tenant.headers(), content="another tenant")
    poisoned = _poisoned(client, tenant, runtime, kind)
    memory_id = poisoned["id"]
    # The memory is quarantined with the reason, at once even when asked to wait
    read = client.get(f"/v1/memories/{memory_id}", headers=h, params={"wait": 5})
    assert read.status_code == 200, read.text
    assert read.json()["status"] == "unprojectable"
    assert read.json()["error"]
    # Its reads and writes answer a problem of their own, never 500
    for method, path, body in (
        ("GET", f"/v1/memories/{memory_id}/history", None),
        ("GET", f"/v1/memories/{memory_id}/versions", None),
        ("POST", f"/v1/memories/{memory_id}/versions", {"content": "a new version"}),
        ("POST", f"/v1/memories/{memory_id}/pin", {}),
    ):
        answer = client.request(method, path, json=body, headers=h)
        assert answer.status_code == 409, (path, answer.text)
        assert problem_slug(answer) == UNPROJECTABLE
    # Every other memory works: the one written after the poison became current
    after = client.get(f"/v1/memories/{poisoned['neighbour']}", headers=h).json()
    assert after["status"] == "current"
    assert (
        client.get(f"/v1/memories/{stranger['id']}", headers=other_tenant.headers()).json()[
            "status"
        ]
        == "current"
    )
    # Counted by the revision status and /metrics
    status = client.get("/v1/revision", headers=h).json()
    assert status["unprojectable_memories"] == 1 and status["dirty_memories"] == 0
    assert status["unprojectable"][0]["memory_id"] == memory_id
    assert 'palimpsest_revision{figure="unprojectable_memories"}' in client.get("/metrics").text
    # The feed carries the event as an opaque, flagged record and goes on past it
    feed = client.get("/v1/events", headers=h, params={"limit": 1000})
    assert feed.status_code == 200, feed.text
    events = feed.json()["events"]
    [flagged] = [e for e in events if e["position"] == poisoned["position"]]
    assert flagged["type"] == "Unreadable"
    assert flagged["aggregate_id"] == memory_id
    assert set(flagged["data"]) == {"topic", "state_sha256", "reason"}
    assert events[-1]["position"] > poisoned["position"]
    # Export carries it too, and ends with its trailer
    export = client.get("/v1/tenant/export", headers=h)
    assert export.status_code == 200
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert lines[-1]["kind"] == "end"
    assert any(
        line.get("type") == "Unreadable" and line["position"] == poisoned["position"]
        for line in lines
    )
    # The forgetting pass's items and a decay cycle go on without it
    assert client.get("/v1/forgetting/items", headers=h).status_code == 200
    for dry_run in (True, False):
        cycle = post(client, "/v1/cycles", {"dry_run": dry_run}, h)
        assert cycle.status_code == 200, cycle.text
    _erase(client, tenant, runtime, [memory_id])


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``palimpsest`` in a process of its own, as an operator would."""
    return subprocess.run(
        [sys.executable, "-m", "palimpsest.api.cli", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_rebuild_and_verify_finish_over_three_tenants_poisoned_with_every_kind(
    client: TestClient, runtime: Runtime, test_database: RunDatabase
) -> None:
    tenants = [
        Tenant(runtime, create_tenant(runtime.log, f"p-{i}-{uuid4().hex[:6]}")) for i in range(3)
    ]
    poisoned: dict[str, Tenant] = {}
    for i, kind in enumerate(KINDS):
        tenant = tenants[i % 3]
        poisoned[_poisoned(client, tenant, runtime, kind)["id"]] = tenant
    for tenant in tenants:
        verified = _cli(test_database.env, "verify", "--tenant", str(tenant.id))
        assert verified.returncode == 0, verified.stderr
        reported = {
            json.loads(line)["unprojectable"]["memory_id"] for line in verified.stdout.splitlines()
        }
        assert reported == {m for m, t in poisoned.items() if t is tenant}
        rebuilt = _cli(test_database.env, "rebuild", "--tenant", str(tenant.id))
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert json.loads(rebuilt.stdout)["unprojectable"] == len(reported)
    rebuilt = _cli(test_database.env, "rebuild", "--workers", "2")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert json.loads(rebuilt.stdout)["unprojectable"] >= len(KINDS)
    verified = _cli(test_database.env, "verify", "--workers", "2")
    assert verified.returncode == 0, verified.stderr
    reported = {
        json.loads(line)["unprojectable"]["memory_id"]
        for line in verified.stdout.splitlines()
        if "unprojectable" in line
    }
    assert set(poisoned) <= reported
    # After the rebuild, each poisoned memory is still quarantined, the rest current
    for memory_id, tenant in poisoned.items():
        read = client.get(f"/v1/memories/{memory_id}", headers=tenant.headers()).json()
        assert read["status"] == "unprojectable"
    assert drain_revisions(runtime.log).claimed == 0
    for memory_id, tenant in poisoned.items():
        _erase(client, tenant, runtime, [memory_id])


def test_a_lone_surrogate_in_a_logged_reason_is_served_escaped(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    h = tenant.headers()
    memory = remember(client, h, content="forgotten with a broken reason")
    drain_until_caught_up(runtime)
    state = {
        "timestamp": {"_type_": "datetime_iso", "_data_": "2026-01-01T00:00:00+00:00"},
        "reason": "ok\udcffx",
        "decision_id": {"_type_": "uuid_hex", "_data_": uuid4().hex},
        "principal_id": {"_type_": "uuid_hex", "_data_": uuid4().hex},
    }
    # json.dumps writes the surrogate as the ASCII escape \udcff: the log holds it
    encoded = json.dumps(state).encode()
    position = insert_event(
        runtime, tenant.id, UUID(memory["id"]), "palimpsest:MemoryArchived", encoded
    )
    drain_until_caught_up(runtime)
    # The six characters \udcff, as docs/revision.md says, in every place that serves it
    served = "ok\\udcffx"
    history = client.get(f"/v1/memories/{memory['id']}/history", headers=h)
    assert history.status_code == 200, history.text
    [archived] = [e for e in history.json()["events"] if e["type"] == "MemoryArchived"]
    assert archived["data"]["reason"] == served
    feed = client.get("/v1/events", headers=h, params={"limit": 1000})
    assert feed.status_code == 200, feed.text
    [logged] = [e for e in feed.json()["events"] if e["position"] == position]
    assert logged["data"]["reason"] == served
    export = client.get("/v1/tenant/export", headers=h)
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert lines[-1]["kind"] == "end"
    [exported] = [line for line in lines if line.get("position") == position]
    assert exported["data"]["reason"] == served


@pytest.mark.parametrize("kind", KINDS)
def test_an_admin_erases_a_quarantined_memory(
    kind: Kind, client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    h = tenant.headers()
    poisoned = _poisoned(client, tenant, runtime, kind)
    memory_id = poisoned["id"]
    [digest] = _payload_digests(runtime, tenant, memory_id)
    erased = post(client, "/v1/erasures", {"memory_ids": [memory_id], "reason": "poisoned"}, h)
    assert erased.status_code == 201, erased.text
    drain_until_caught_up(runtime)
    # Its content is gone, and it reads as erased, not unprojectable
    assert not _payload_exists(runtime, digest)
    read = client.get(f"/v1/memories/{memory_id}", headers=h).json()
    assert read["status"] == "erased"
    history = client.get(f"/v1/memories/{memory_id}/history", headers=h)
    assert history.status_code == 200, history.text
    assert history.json()["erased"] is not None
    assert [e["type"] for e in history.json()["events"]].count("Unreadable") == 1
    assert client.get("/v1/revision", headers=h).json()["unprojectable_memories"] == 0
    # Rebuild and verify read it as the service does
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    assert verify(runtime.database, tenant=tenant.id).unprojectable == []
    rebuild_tenant(runtime.database, tenant.id)
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    assert client.get(f"/v1/memories/{memory_id}", headers=h).json()["status"] == "erased"


def _payload_digests(runtime: Runtime, tenant: Tenant, memory_id: str) -> list[str]:
    """The content digests of the memory's versions (as the owner)."""
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        rows = conn.execute(
            f'SELECT digest FROM "{schema}".version_digests WHERE tenant_id = %s'
            " AND memory_id = %s",
            (tenant.id, UUID(memory_id)),
        ).fetchall()
    return [row[0] for row in rows]


def _payload_exists(runtime: Runtime, digest: str) -> bool:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}".payloads WHERE digest = %s', (digest,)
        ).fetchone()
    return bool(row and row[0])


def _erase(client: TestClient, tenant: Tenant, runtime: Runtime, memory_ids: list[str]) -> None:
    """Erase quarantined memories, as an admin ends a quarantine (so that the session's
    store, which other tests count quarantined memories in, holds none of ours)."""
    erased = post(
        client, "/v1/erasures", {"memory_ids": memory_ids, "reason": "poison"}, tenant.headers()
    )
    assert erased.status_code == 201, erased.text
    drain_until_caught_up(runtime)
