"""``palimpsest cycle``: a client of the running service's ``POST /v1/cycles``."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from palimpsest.api.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from tests.api.helpers import remember
from tests.api.live_server import live_server
from tests.conftest import Tenant, drain_until_caught_up


def test_cycle_runs_through_the_service_and_checks_the_tenant(
    client: TestClient,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    remember(client, tenant.headers("writer"), type="note", content="Rename the bucket.")
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    with live_server(client.app) as url:  # type: ignore[arg-type]
        assert (
            main(["cycle", "--url", url, "--dry-run", "--json", "--tenant", str(tenant.id)])
            == EXIT_OK
        )
        dry = json.loads(capsys.readouterr().out)
        assert dry["dry_run"] is True and sum(dry["counts"].values()) >= 0
        assert main(["cycle", "--url", url, "--json"]) == EXIT_OK
        ran = json.loads(capsys.readouterr().out)
        assert ran["dry_run"] is False
        read = client.get(f"/v1/cycles/{ran['cycle_id']}", headers=tenant.headers("reader"))
        assert read.status_code == 200
        assert main(["cycle", "--url", url, "--tenant", "someone-else"]) == EXIT_USAGE
        monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.token("writer"))
        assert main(["cycle", "--url", url]) == EXIT_FAILURE  # 403: not an admin


def test_cycle_prints_one_screen_naming_memories_by_text(
    client: TestClient,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for n in range(12):
        remember(client, tenant.headers("writer"), type="note", content=f"Scratch note {n}.")
    drain_until_caught_up(client.app.state.runtime)  # type: ignore[attr-defined]
    # Everything prunes: twelve proposals, more than one screen's list holds.
    policy = {"fade_below": 1.0, "prune_below": 1.0}
    assert client.put("/v1/tenant/forgetting", json=policy, headers=tenant.headers()).is_success
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    with live_server(client.app) as url:  # type: ignore[arg-type]
        assert main(["cycle", "--url", url]) == EXIT_OK
    summary = capsys.readouterr().out
    lines = summary.splitlines()
    assert len(lines) <= 40 and max(len(line) for line in lines) <= 160
    assert "prune 12" in lines[1]
    assert "proposed for review (12)" in summary and "“Scratch note" in summary
    assert "and 7 more" in summary
    assert "prune: score below prune_below" in summary  # the buckets explained
