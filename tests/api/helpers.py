"""Small request helpers shared by the API tests."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def post(client: TestClient, path: str, body: Any, headers: dict[str, str]) -> Any:
    """POST JSON and return the response."""
    return client.post(path, json=body, headers=headers)


def problem_slug(response: Any) -> str:
    """Return the problem type slug of a problem+json response."""
    assert response.headers["content-type"].startswith("application/problem+json"), response.text
    body = response.json()
    assert body["status"] == response.status_code
    return str(body["type"]).rsplit(":", 1)[-1]


def observe(
    client: TestClient, headers: dict[str, str], content: str = "I prefer dark mode."
) -> str:
    """Capture an observation and return its id."""
    response = post(client, "/v1/observations", {"content": content}, headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def remember(client: TestClient, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    """Create a memory and return the response body."""
    body = {"type": "preference", "scope": "user", "content": "Prefers dark mode", **fields}
    response = post(client, "/v1/memories", body, headers)
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result
