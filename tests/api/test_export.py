"""Tenant export: everything the tenant owns, nothing of anyone else's."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant


def _export(client: TestClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    response = client.get("/v1/tenant/export", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def test_export_holds_every_event_and_payload_of_the_tenant_only(
    client: TestClient, tenant: Tenant, other_tenant: Tenant
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "Our standup moved to 9:30.")
    memory = remember(
        client,
        headers,
        content="Standup at 9:30",
        evidence=[{"observation_id": obs, "start": 20, "end": 25}],
    )
    post(client, f"/v1/memories/{memory['id']}/pin", {}, headers)
    remember(client, other_tenant.headers(), content="someone else's secret")

    lines = _export(client, headers)
    header, *body, end = lines
    assert header["kind"] == "header" and header["tenant_id"] == str(tenant.id)
    events = [line for line in body if line["kind"] == "event"]
    payloads = [line for line in body if line["kind"] == "payload"]
    assert end == {
        "kind": "end",
        "events": len(events),
        "payloads": len(payloads),
        "erasure_receipts": 0,
    }
    feed = client.get("/v1/events", headers=headers, params={"limit": 1000}).json()["events"]
    assert [e["position"] for e in events] == [e["position"] for e in feed]
    assert {"MemoryPinned", "DecisionRecorded", "ObservationCaptured"} <= {
        e["type"] for e in events
    }
    contents = {p["content"] for p in payloads}
    assert {"Our standup moved to 9:30.", "Standup at 9:30"} <= contents
    text = json.dumps(lines)
    assert "someone else's secret" not in text
    assert "token_digest" not in text


def test_only_an_admin_exports(client: TestClient, tenant: Tenant) -> None:
    for role in ("reader", "writer"):
        response = client.get("/v1/tenant/export", headers=tenant.headers(role))
        assert response.status_code == 403 and problem_slug(response) == "forbidden"
    assert client.get("/v1/tenant/export").status_code == 401
