"""Every verb that writes or administers, as a reader, as another tenant's writer,
and without a token: refused, and nothing written."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.api.helpers import observe, problem_slug, remember
from tests.conftest import Tenant


def test_every_verb_refuses_readers_strangers_and_anonymous_callers(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers)
    memory = remember(client, headers)
    m, o = memory["id"], obs
    verbs: list[tuple[str, str, Any]] = [
        ("POST", "/v1/observations", {"content": "x"}),
        ("POST", "/v1/memories", {"type": "fact", "scope": "user", "content": "x"}),
        ("POST", f"/v1/memories/{m}/versions", {"content": "x"}),
        ("POST", f"/v1/memories/{m}/edges", {"kind": "extends", "target_id": m}),
        ("POST", "/v1/batch", {"items": [{"op": "create_observation", "content": "x"}]}),
        ("POST", f"/v1/observations/{o}/retract", {}),
        ("POST", "/v1/proposers/model=judge-1.4/withdraw", {}),
        ("POST", f"/v1/memories/{m}/forget", {"reason": "x"}),
        ("POST", f"/v1/memories/{m}/restore", {}),
        ("POST", f"/v1/memories/{m}/pin", {}),
        ("POST", f"/v1/memories/{m}/unpin", {}),
        ("PUT", "/v1/tenant/retention", {"raw_hours": 24}),
        ("POST", "/v1/admin/cache/evict", {}),
        ("GET", "/v1/tenant/export", None),
        ("POST", "/v1/erasures", {"observation_ids": [o], "memory_ids": [m], "reason": "x"}),
        ("DELETE", "/v1/tenant", None),
    ]
    # These act on the caller's own tenant: a stranger has nothing of ours to reach.
    tenant_wide = {
        "/v1/observations",
        "/v1/memories",
        "/v1/batch",
        "/v1/proposers/model=judge-1.4/withdraw",
        "/v1/tenant/retention",
        "/v1/admin/cache/evict",
        "/v1/tenant/export",
        "/v1/tenant",
    }
    reader = tenant.headers("reader")
    stranger = other_tenant.headers("writer")
    before = snapshot()
    for method, path, body in verbs:
        as_reader = client.request(method, path, json=body, headers=reader)
        assert as_reader.status_code == 403, (method, path, as_reader.text)
        assert problem_slug(as_reader) == "forbidden"
        anonymous = client.request(method, path, json=body)
        assert anonymous.status_code == 401, (method, path)
        assert problem_slug(anonymous) == "unauthenticated"
        if path in tenant_wide:
            continue
        elsewhere = client.request(method, path, json=body, headers=stranger)
        assert elsewhere.status_code in (404, 403), (method, path, elsewhere.text)
    assert snapshot() == before
    # The receipt of an erasure is an administrator's read, in the erasing tenant.
    erased = client.post(
        "/v1/erasures", json={"observation_ids": [o], "reason": "x"}, headers=headers
    ).json()
    their_admin = other_tenant.headers()
    for who, status in ((reader, 403), (stranger, 403), (their_admin, 404), ({}, 401)):
        receipt = client.get(f"/v1/erasures/{erased['id']}", headers=who)
        assert receipt.status_code == status, (who, receipt.text)
