"""Verified tokens are trusted for a bounded time: a revocation by this process
takes effect at once, one by another process within the bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from palimpsest.domain.errors import AuthenticationError
from palimpsest.projections.commands.tokens import authenticate, issue_token, revoke_token
from palimpsest.projections.runtime import Runtime
from tests.conftest import RunDatabase, Tenant

_CLI = (sys.executable, "-m", "palimpsest.api.cli")


def test_a_token_revoked_by_this_process_stops_working_at_once(
    runtime: Runtime, tenant: Tenant
) -> None:
    issued = issue_token(runtime.log, tenant.id, "bot", "reader")
    assert authenticate(runtime.log, issued.token, max_age_s=60).role == "reader"
    assert revoke_token(runtime.log, tenant.id, issued.token_id)
    with pytest.raises(AuthenticationError):
        authenticate(runtime.log, issued.token, max_age_s=60)


@pytest.mark.slow
def test_a_token_revoked_by_another_process_stops_working_within_the_bound(
    runtime: Runtime, tenant: Tenant, test_database: RunDatabase
) -> None:
    issued = issue_token(runtime.log, tenant.id, "bot", "reader")
    bound_s = 2.0
    assert authenticate(runtime.log, issued.token, max_age_s=bound_s).role == "reader"
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    revoked = subprocess.run(
        [*_CLI, "token", "revoke", str(issued.token_id), "--tenant", str(tenant.id)],
        env={**env, **test_database.env},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads(revoked.stdout)["revoked"] is True
    revoked_at = time.monotonic()
    # Asking the database (a bound of 0) sees the revocation at once ...
    with pytest.raises(AuthenticationError):
        authenticate(runtime.log, issued.token, max_age_s=0)
    # ... and no verification older than the bound is trusted.
    time.sleep(max(0.0, bound_s - (time.monotonic() - revoked_at)) + 0.1)
    with pytest.raises(AuthenticationError):
        authenticate(runtime.log, issued.token, max_age_s=bound_s)
