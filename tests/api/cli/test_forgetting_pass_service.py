"""``palimpsest forgetting-pass`` asks the running service whether there is a pass, and
which judge it has: never its own environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import start_serve, stop_serve
from tests.conftest import Tenant


@pytest.mark.slow
def test_the_one_shot_runs_the_pass_the_service_has_not_the_one_its_own_environment_says(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    body = {"enabled": True, "daily_calls": 10, "daily_tokens": 100_000}
    assert client.put("/v1/tenant/judgment", json=body, headers=tenant.headers()).is_success
    server, base = start_serve(
        runtime,
        settings={"PALIMPSEST_FORGETTING_PASS_ENABLED": "true", "PALIMPSEST_JUDGE": "operator"},
    )
    try:
        # This process's environment has the pass off and no judge: the service's counts.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
        env["PALIMPSEST_TOKEN"] = tenant.admin.token
        done = subprocess.run(
            [sys.executable, "-m", "palimpsest.api.cli", "forgetting-pass", "--url", base],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stop_serve(server)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stopped"] is None and report["calls"] == 0
    assert report["queued"] == report["items"]
