"""Requests an attacker holding an ordinary token might send (issue 17, item 8)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import problem_slug
from tests.conftest import Tenant, store_snapshot


def test_two_authorization_headers_are_refused_and_write_nothing(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    mine, theirs = tenant.headers()["Authorization"], other_tenant.headers()["Authorization"]
    before = store_snapshot(runtime)
    for pair in ([mine, theirs], [mine, mine]):
        answer = client.post(
            "/v1/observations",
            json={"content": "which tenant am I?"},
            headers=[("Authorization", value) for value in pair],
        )
        assert answer.status_code == 400, answer.text
        assert problem_slug(answer) == "repeated-header"
    assert store_snapshot(runtime) == before
