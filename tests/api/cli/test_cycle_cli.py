"""``palimpsest cycle``: a client of the running service's ``POST /v1/cycles``."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from palimpsest.api.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, main
from tests.api.helpers import remember
from tests.api.live_server import live_server
from tests.conftest import Tenant


def test_cycle_runs_through_the_service_and_checks_the_tenant(
    client: TestClient,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    remember(client, tenant.headers("writer"), type="note", content="Rename the bucket.")
    monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.admin.token)
    with live_server(client.app) as url:  # type: ignore[arg-type]
        assert main(["cycle", "--url", url, "--dry-run", "--tenant", str(tenant.id)]) == EXIT_OK
        dry = json.loads(capsys.readouterr().out)
        assert dry["dry_run"] is True and sum(dry["counts"].values()) >= 0
        assert main(["cycle", "--url", url]) == EXIT_OK
        ran = json.loads(capsys.readouterr().out)
        assert ran["dry_run"] is False
        read = client.get(f"/v1/cycles/{ran['cycle_id']}", headers=tenant.headers("reader"))
        assert read.status_code == 200
        assert main(["cycle", "--url", url, "--tenant", "someone-else"]) == EXIT_USAGE
        monkeypatch.setenv("PALIMPSEST_TOKEN", tenant.token("writer"))
        assert main(["cycle", "--url", url]) == EXIT_FAILURE  # 403: not an admin
