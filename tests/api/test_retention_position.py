"""``/v1/tenant/retention``: ``position`` belongs to the write that set it, not to a read."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.conftest import Tenant


def test_only_the_write_answers_with_a_log_position(client: TestClient, tenant: Tenant) -> None:
    read = client.get("/v1/tenant/retention", headers=tenant.headers("reader"))
    assert read.status_code == 200
    assert set(read.json()) == {
        "raw_hours",
        "transient_hours",
        "max_raw_hours",
        "max_transient_hours",
    }
    written = client.put("/v1/tenant/retention", json={"raw_hours": 2}, headers=tenant.headers())
    assert written.status_code == 200
    assert written.json()["raw_hours"] == 2 and written.json()["position"] > 0
    assert "position" not in client.get("/v1/tenant/retention", headers=tenant.headers()).json()
