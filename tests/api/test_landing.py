"""``GET /``: where a person or a program that found the service goes next."""

from __future__ import annotations

from fastapi.testclient import TestClient

import palimpsest
from tests.api.helpers import remember
from tests.conftest import Tenant


def test_the_root_points_at_every_entrance_with_the_version_and_needs_no_token(
    client: TestClient,
) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    landing = response.json()
    assert landing["name"] == "palimpsest"
    assert landing["version"] == palimpsest.__version__
    links = landing["links"]
    assert {"review", "openapi", "mcp", "readyz", "healthz", "metrics"} <= set(links)
    assert "docs" not in links  # not served: /openapi.json is the reference
    # Each link leads somewhere this service answers (not a 404)
    for name in ("review", "openapi", "readyz", "healthz", "metrics"):
        assert client.get(links[name]).status_code != 404, name
    assert links["mcp"] == "/mcp"


def test_the_root_lists_no_tenant_data_whoever_asks(client: TestClient, tenant: Tenant) -> None:
    remember(client, tenant.headers(), content="a secret preference of the tenant")
    anonymous = client.get("/")
    authenticated = client.get("/", headers=tenant.headers())
    assert authenticated.json() == anonymous.json()
    assert str(tenant.id) not in authenticated.text
    assert "secret preference" not in authenticated.text
