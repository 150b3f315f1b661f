"""A ``resolution`` on a proposal that is not a conflict: a documented 409 of its own,
never a 422 for a body the schema accepts, and nothing written."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._problems import problem_type
from palimpsest.projections.runtime import Runtime
from tests.api.fuzzing import open_proposals_of_every_kind
from tests.api.helpers import problem_slug
from tests.conftest import Tenant


@pytest.mark.parametrize("resolution", ["supersede", "archive_older"])
def test_a_resolution_on_a_proposal_that_is_not_a_conflict_is_a_documented_409(
    client: TestClient, runtime: Runtime, tenant: Tenant, snapshot: Any, resolution: str
) -> None:
    archive, supersede, conflict, decay, merge = open_proposals_of_every_kind(
        runtime, tenant.admin.token
    )
    writer, admin = tenant.headers("writer"), tenant.headers()  # tokens are events too
    before = snapshot()
    for proposal in (archive, supersede, decay, merge):
        response = client.post(
            f"/v1/proposals/{proposal}/apply",
            json={"resolution": resolution},
            headers=writer,
        )
        assert response.status_code == 409, response.text
        assert problem_slug(response) == "resolution-not-applicable"
        shown = client.get(f"/v1/proposals/{proposal}", headers=admin)
        assert shown.json()["status"] == "proposed"
    assert snapshot() == before
    # The conflict takes it.
    resolved = client.post(
        f"/v1/proposals/{conflict}/apply",
        json={"resolution": resolution, "reason": "the newer one holds"},
        headers=writer,
    )
    assert resolved.status_code == 201, resolved.text


def test_the_apply_route_documents_the_refusal(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/proposals/{proposal_id}/apply"]
    documented = operation["post"]["responses"]["409"]["description"]
    assert "resolution-not-applicable" in documented
    assert problem_type("resolution-not-applicable").endswith(":resolution-not-applicable")
