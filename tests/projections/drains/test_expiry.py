"""Raw expiry: bytes go at their deadline, exactly once; memories and excerpts stay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, count_events, drain_until_caught_up

LATER = datetime.now(UTC) + timedelta(days=31)


@pytest.fixture
def later(runtime: Runtime) -> Iterator[TestClient]:
    """The API as it answers 31 days from now."""
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: LATER)) as client:
        yield client


def _payload_rows(runtime: Runtime, tenant: Tenant, digest: str) -> int:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{schema}".payloads WHERE tenant_id = %s AND digest = %s',
            (tenant.id, digest),
        ).fetchone()
    return int(row[0]) if row else 0


def _expire_all(runtime: Runtime, now: datetime = LATER) -> int:
    total = 0
    while expired := expire_due(runtime.log, now=now):
        total += expired
    return total


def test_expiry_deletes_the_bytes_once_and_keeps_the_memory_and_its_excerpt(
    client: TestClient, later: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a memory citing an observation, current today
    headers = tenant.headers()
    obs = observe(client, headers, "I moved to Lyon in March.")
    memory = remember(
        client,
        headers,
        type="fact",
        content="Lives in Lyon",
        evidence=[{"observation_id": obs, "start": 11, "end": 15}],
    )
    drain_until_caught_up(runtime)
    assert client.get(f"/v1/memories/{memory['id']}", headers=headers).json()["status"] == "current"
    digest = client.get(f"/v1/observations/{obs}", headers=headers).json()["digest"]

    # When the deadline has passed but no expiry pass has run yet
    content = later.get(f"/v1/observations/{obs}/content", headers=headers)
    assert content.status_code == 410
    assert problem_slug(content) == "content-expired"
    pending = later.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert pending["status"] == "pending"
    assert [d["observation_id"] for d in pending["due"]] == [obs]
    assert _payload_rows(runtime, tenant, digest) == 1

    # Then a pass deletes the bytes and records ObservationExpired, once
    assert _expire_all(runtime) >= 1
    assert _expire_all(runtime) == 0
    assert count_events(runtime, tenant, "ObservationExpired") == 1
    assert _payload_rows(runtime, tenant, digest) == 0

    # And the memory is current again, its excerpt still cited, the metadata still there
    drain_until_caught_up(runtime)
    assert later.get(f"/v1/memories/{memory['id']}", headers=headers).json()["status"] == "current"
    [version] = later.get(f"/v1/memories/{memory['id']}/versions", headers=headers).json()[
        "versions"
    ]
    assert version["content"] == "Lives in Lyon"
    assert version["evidence"][0]["observation_id"] == obs
    meta = later.get(f"/v1/observations/{obs}", headers=headers).json()
    assert meta["expired"] is True and meta["digest"] == digest
    assert later.get(f"/v1/observations/{obs}/content", headers=headers).status_code == 410


def test_transient_observations_fall_due_after_a_day_and_raw_ones_do_not(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    transient = post(
        client, "/v1/observations", {"content": "tool output", "transient": True}, headers
    ).json()["id"]
    raw = observe(client, headers, "a raw report")
    tomorrow = datetime.now(UTC) + timedelta(hours=25)
    with TestClient(create_app(ApiSettings(), runtime, clock=lambda: tomorrow)) as next_day:
        assert (
            next_day.get(f"/v1/observations/{transient}/content", headers=headers).status_code
            == 410
        )
        assert next_day.get(f"/v1/observations/{raw}/content", headers=headers).status_code == 200


@pytest.mark.parametrize("shared_by", ["memory version", "live observation"])
def test_bytes_still_needed_elsewhere_are_kept(
    client: TestClient, tenant: Tenant, runtime: Runtime, shared_by: str
) -> None:
    # Given an observation whose exact content is also held by something else
    headers = tenant.headers()
    text = f"The same words, twice ({shared_by})."
    doomed = post(client, "/v1/observations", {"content": text, "transient": True}, headers).json()[
        "id"
    ]
    if shared_by == "memory version":
        memory = remember(client, headers, content=text)
    else:
        keeper = observe(client, headers, text)
    digest = client.get(f"/v1/observations/{doomed}", headers=headers).json()["digest"]
    # When the transient observation expires
    tomorrow = datetime.now(UTC) + timedelta(hours=25)
    assert _expire_all(runtime, tomorrow) >= 1
    # Then the shared bytes are kept for the other holder
    assert _payload_rows(runtime, tenant, digest) == 1
    if shared_by == "memory version":
        versions = client.get(f"/v1/memories/{memory['id']}/versions", headers=headers).json()
        assert versions["versions"][0]["content"] == text
    else:
        assert client.get(f"/v1/observations/{keeper}/content", headers=headers).text == text


def test_a_pass_killed_mid_batch_resumes_without_skipping(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    for i in range(5):
        observe(client, headers, f"report {i}")
    # Each bounded pass could be the last before a kill; the next one resumes.
    passes = 0
    while expire_due(runtime.log, now=LATER, limit=2) > 0:
        passes += 1
    assert passes >= 3
    assert count_events(runtime, tenant, "ObservationExpired") == 5
    assert _expire_all(runtime) == 0


def test_expiry_events_name_the_system_principal(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    from palimpsest.domain.tenant import principal_id_for
    from palimpsest.projections.drains._expiry import EXPIRY_PRINCIPAL

    observe(client, tenant.headers(), "soon gone")
    _expire_all(runtime)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT state FROM "{schema}"."{EVENTS_TABLE}" WHERE tenant_id = %s'
            " AND topic = 'palimpsest:ObservationExpired' LIMIT 1",
            (tenant.id,),
        ).fetchone()
    assert row is not None
    state: dict[str, Any] = json.loads(bytes(row[0]))
    assert state["principal_id"]["_data_"] == principal_id_for(tenant.id, EXPIRY_PRINCIPAL).hex
