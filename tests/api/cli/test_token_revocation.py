"""A revoked token: refused at once by the process that revoked it, and by a serving
process that verified it lately within ``PALIMPSEST_TOKEN_CACHE_S``."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx2
import pytest
from fastapi.testclient import TestClient

from palimpsest.projections.commands.tokens import issue_token, revoke_token
from palimpsest.projections.runtime import Runtime
from tests.api.cli.serving import serve_env, start_serve, stop_serve
from tests.conftest import Tenant

_BOUND_S = 1.0


def test_a_token_revoked_in_the_serving_process_is_refused_by_its_next_request(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a token the app verified (and so trusts for its cache's lifetime)
    issued = issue_token(runtime.log, tenant.id, "bot", "reader")
    headers = {"Authorization": f"Bearer {issued.token}"}
    assert client.get("/v1/memories", headers=headers).status_code == 200
    # When this process revokes it (the API has no route that revokes a token; an
    # application serving the app revokes through the command layer)
    assert revoke_token(runtime.log, tenant.id, issued.token_id)
    # Then the very next request is refused
    refused = client.get("/v1/memories", headers=headers)
    assert refused.status_code == 401
    assert refused.json()["type"] == "urn:palimpsest:problem:unauthenticated"


@pytest.mark.slow
def test_a_token_revoked_from_the_command_line_is_refused_by_serve_within_the_bound(
    runtime: Runtime, tenant: Tenant
) -> None:
    cache = {"PALIMPSEST_TOKEN_CACHE_S": str(_BOUND_S)}
    server, base = start_serve(runtime, settings=cache)
    try:
        # Given a token serve verified, and trusts for the bound
        issued = issue_token(runtime.log, tenant.id, "bot", "reader")
        headers = {"Authorization": f"Bearer {issued.token}"}
        assert httpx2.get(f"{base}/v1/memories", headers=headers, timeout=10).status_code == 200
        # When `palimpsest token revoke` returns
        revoked = subprocess.run(
            [
                sys.executable,
                "-m",
                "palimpsest",
                "token",
                "revoke",
                str(issued.token_id),
                "--tenant",
                str(tenant.id),
            ],
            env=serve_env(runtime, cache),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        returned = time.monotonic()
        assert revoked.returncode == 0, revoked.stderr
        assert json.loads(revoked.stdout)["revoked"] is True
        # Then once the documented bound has passed, serve refuses it
        time.sleep(max(0.0, _BOUND_S - (time.monotonic() - returned)))
        refused = httpx2.get(f"{base}/v1/memories", headers=headers, timeout=10)
        assert refused.status_code == 401
        assert refused.json()["type"] == "urn:palimpsest:problem:unauthenticated"
    finally:
        stop_serve(server)
