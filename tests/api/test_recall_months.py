"""Recall favours the memories of the month a question names ("When did we go camping in
June?"), by each memory's time: the latest capture its support cites, moved by a
reaffirm citing a newer one."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

_CAMPING = {
    "lake": ("2023-06-10T18:00:00Z", "Melanie went camping at the lake with her kids."),
    "hills": ("2023-08-12T18:00:00Z", "Melanie went camping in the hills with her kids."),
}


def _captured(client: TestClient, headers: dict[str, str], at: str, content: str) -> str:
    response = post(client, "/v1/observations", {"content": content, "captured_at": at}, headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _first(client: TestClient, headers: dict[str, str], query: str, **body: Any) -> list[str]:
    response = post(client, "/v1/recall", {"query": query, "k": 5, **body}, headers)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


def test_the_month_a_question_names_puts_that_months_memory_first(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    ids: dict[str, str] = {}
    for name, (at, text) in _CAMPING.items():
        observation = _captured(client, headers, at, text)
        ids[name] = remember(
            client,
            headers,
            type="note",
            content=text,
            evidence=[{"observation_id": observation, "start": 0, "end": len(text)}],
        )["id"]
    index_until_caught_up(runtime, tenant.id)

    # The months are in neither memory's words: only their times tell them apart, and
    # each item says whether the month raised it.
    response = post(client, "/v1/recall", {"query": "Melanie camping in June?"}, headers)
    ranks = {item["id"]: item["rank"] for item in response.json()["items"]}
    assert ranks[ids["lake"]]["in_named_month"] is True
    assert ranks[ids["hills"]]["in_named_month"] is False
    assert ranks[ids["lake"]]["fused"] > ranks[ids["hills"]]["fused"]
    assert _first(client, headers, "When did Melanie go camping in June?")[0] == ids["lake"]
    assert (
        _first(client, headers, "When did Melanie go camping in August 2023?")[0] == (ids["hills"])
    )
    assert _first(client, headers, "Did Melanie go camping on 12 August?")[0] == ids["hills"]
    # Another year's June is not this June; a single mode ranks by its own score alone.
    unnamed = _first(client, headers, "When did Melanie go camping?")
    assert _first(client, headers, "When did Melanie go camping in June 2022?") == unnamed
    for mode in ("vector", "text"):
        assert _first(client, headers, "Melanie camping in June", mode=mode) == _first(
            client, headers, "Melanie camping in August", mode=mode
        )
        single = post(client, "/v1/recall", {"query": "camping in June", "mode": mode}, headers)
        assert {i["rank"]["in_named_month"] for i in single.json()["items"]} == {None}

    # A reaffirm citing a newer capture moves the memory's time, with no new version.
    later = unnamed[1]
    text = "Camping again, same place as last time."
    october = _captured(client, headers, "2023-10-01T09:00:00Z", text)
    added = post(
        client,
        f"/v1/memories/{later}/contributions",
        {"evidence": [{"observation_id": october, "start": 0, "end": len(text)}]},
        headers,
    )
    assert added.status_code == 201, added.text
    index_until_caught_up(runtime, tenant.id)
    assert _first(client, headers, "When did Melanie go camping in October?")[0] == later
    assert _first(client, headers, "When did Melanie go camping?") == unnamed
