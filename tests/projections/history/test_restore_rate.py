"""The restore-rate tuning script (``tests/benchmarks/restore_rate.py``) on a small real log:
forgets split by cause, and the restores that reversed them, with how soon."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.benchmarks.restore_rate import restore_rates
from tests.conftest import Tenant


def _label(client: TestClient, tenant: Tenant, memory_id: str, op: str, reason: str) -> None:
    response = post(client, f"/v1/memories/{memory_id}/{op}", {"reason": reason}, tenant.headers())
    assert response.status_code in (200, 201), response.text


def test_the_restore_rate_counts_forgets_later_restored(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    kept, back, decayed, judged_id = (
        remember(client, tenant.headers(), content=f"Fact {n}")["id"] for n in range(4)
    )
    _label(client, tenant, kept, "forget", "obsolete")
    _label(client, tenant, back, "forget", "obsolete")
    _label(client, tenant, back, "restore", "needed after all")
    _label(client, tenant, decayed, "forget", "decayed")
    judged = post(
        client,
        "/v1/forgetting/verdicts",
        {"verdicts": [{"memory_id": judged_id, "action": "archive", "confidence": 0.99}]},
        tenant.headers(),
    )
    assert judged.status_code == 201, judged.text
    proposal = judged.json()["results"][0]["id"]
    applied = post(client, f"/v1/proposals/{proposal}/apply", {}, tenant.headers())
    assert applied.status_code == 201, applied.text
    _label(client, tenant, judged_id, "restore", "wrongly judged")

    rates = {r.cause: r for r in restore_rates(runtime.log, tenant.id)}
    assert set(rates) == {"decayed", "forgotten"}
    forgotten = rates["forgotten"]
    assert (forgotten.archived, forgotten.restored, forgotten.rate) == (3, 2, 2 / 3)
    assert all(timedelta(0) <= d < timedelta(minutes=5) for d in forgotten.delays)
    assert forgotten.policy_version.startswith("palimpsest-policy/")
    assert (rates["decayed"].archived, rates["decayed"].restored) == (1, 0)
