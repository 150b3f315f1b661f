"""Stored content never runs in a browser that reaches the API (issue 17, item 5)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.helpers import post, problem_slug
from tests.conftest import Tenant

ACTIVE = [
    ("text/html", "<script>alert(document.cookie)</script>"),
    ("image/svg+xml", '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'),
]


@pytest.mark.parametrize(("media_type", "content"), ACTIVE)
def test_active_content_is_served_as_a_sandboxed_attachment(
    client: TestClient, tenant: Tenant, media_type: str, content: str
) -> None:
    headers = tenant.headers()
    created = post(
        client, "/v1/observations", {"content": content, "media_type": media_type}, headers
    )
    assert created.status_code == 201, created.text
    served = client.get(f"/v1/observations/{created.json()['id']}/content", headers=headers)
    assert served.status_code == 200
    assert served.text == content  # the bytes are the caller's, unchanged
    assert served.headers["content-type"].startswith(media_type)
    assert served.headers["x-content-type-options"] == "nosniff"
    assert served.headers["content-disposition"].startswith("attachment")
    policy = served.headers["content-security-policy"]
    assert "sandbox" in policy
    assert "default-src 'none'" in policy


def test_plain_text_is_inline_but_still_sandboxed(client: TestClient, tenant: Tenant) -> None:
    headers = tenant.headers()
    created = post(client, "/v1/observations", {"content": "just words"}, headers)
    served = client.get(f"/v1/observations/{created.json()['id']}/content", headers=headers)
    assert served.status_code == 200
    assert "content-disposition" not in served.headers
    assert "sandbox" in served.headers["content-security-policy"]
    assert served.headers["x-content-type-options"] == "nosniff"


def test_every_answer_says_nosniff_errors_included(client: TestClient, tenant: Tenant) -> None:
    answers = [
        client.get("/healthz"),
        client.get("/v1/memories", headers=tenant.headers()),
        client.get("/v1/memories"),  # 401 problem
        client.get("/v1/no-such-route"),  # 404 problem
    ]
    assert [a.status_code for a in answers] == [200, 200, 401, 404]
    assert problem_slug(answers[2]) == "unauthenticated"
    for answer in answers:
        assert answer.headers["x-content-type-options"] == "nosniff", answer.request.url
