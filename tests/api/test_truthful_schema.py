"""The request rules are the published ones: what the OpenAPI document accepts is
accepted, what it refuses is refused before anything is read or written.

Each test names what a user (or a generated client) would notice: a NUL that
would poison the store refused at the edge, a ``0`` not read as ``false``, a
reader refused before being told the body's rules, the document stating the
answers a route really gives.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import Tenant, drain_until_caught_up

MEMORY = {"type": "fact", "scope": "user", "content": "The sky is blue"}
NUL = "ok\u0000x"
# An identifier no store holds, the same in every process (pytest-xdist's workers
# must collect the same parametrized test names).
NOWHERE = uuid.UUID("0b6e1c52-6f8e-4a44-9c1d-3f1e2d7a5b90")


def _refused(response: Any, status: int = 422) -> str:
    assert response.status_code == status, response.text
    return problem_slug(response)


# -- U+0000 never reaches PostgreSQL text or jsonb ------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/observations", {"content": "x", "source": NUL}),
        ("/v1/memories", {**MEMORY, "scope": NUL}),
        ("/v1/memories", {**MEMORY, "project": NUL}),
        ("/v1/memories", {**MEMORY, "topic": NUL}),
        ("/v1/memories", {**MEMORY, "model_id": NUL}),
        ("/v1/recall", {"query": NUL}),
        ("/v1/erasures", {"memory_ids": [str(NOWHERE)], "reason": NUL}),
        ("/v1/proposers/model=m/withdraw", {"reason": NUL}),
        ("/v1/proposers/model=m/withdraw", {"model": NUL}),
        ("/v1/batch", {"items": [{"op": "create_observation", "content": "x", "source": NUL}]}),
    ],
)
def test_a_nul_in_any_text_field_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, path: str, body: dict[str, Any]
) -> None:
    before = snapshot()
    assert _refused(post(client, path, body, tenant.headers())) == "validation-error"
    assert snapshot() == before


@pytest.mark.parametrize("verb", ["forget", "pin", "unpin", "restore"])
def test_a_nul_in_a_reason_is_refused_wherever_it_falls(
    client: TestClient, tenant: Tenant, snapshot: Any, verb: str
) -> None:
    # The reason pattern once checked only the start: "ok\0x" passed and wedged
    # the memory's revision forever (issue 17, item 1).
    headers = tenant.headers()
    memory = remember(client, headers)
    before = snapshot()
    for reason in (NUL, "\u0000", "ok\u0000", "line\nok\u0000"):
        response = post(client, f"/v1/memories/{memory['id']}/{verb}", {"reason": reason}, headers)
        assert _refused(response) == "validation-error", reason
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/memories?scope=a%00b"),
        ("GET", "/v1/memories?project=a%00b"),
        ("GET", "/v1/memories?topic=a%00b"),
        ("GET", "/v1/memories?cursor=a%00b"),
        ("GET", "/v1/observations?cursor=a%00b"),
        ("POST", "/v1/proposers/model=a%00b/withdraw"),
        ("POST", "/v1/proposers/model=%01x/withdraw"),
        ("POST", f"/v1/proposers/{NOWHERE}/withdraw?model=%01"),
        ("POST", f"/v1/proposers/{NOWHERE}/withdraw?model=a%00b"),
        ("DELETE", "/v1/tenant?reason=a%00b"),
        ("DELETE", "/v1/tenant?confirm=a%00b"),
    ],
)
def test_hostile_query_and_path_text_is_a_4xx_problem_not_a_500(
    client: TestClient, tenant: Tenant, snapshot: Any, method: str, path: str
) -> None:
    before = snapshot()
    response = client.request(method, path, headers=tenant.headers())
    assert response.status_code == 422, response.text
    assert problem_slug(response) == "validation-error"
    assert snapshot() == before


def test_content_may_hold_any_character_as_it_is_stored_as_bytes(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    text = "before\u0000after \x01\x7f"
    obs = observe(client, headers, text)
    assert client.get(f"/v1/observations/{obs}/content", headers=headers).text == text
    memory = remember(client, headers, content=text)
    drain_until_caught_up(runtime)  # the revision drain projects it: nothing wedged
    read = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert read["status"] == "current" and read["content"] == text


def test_every_published_text_refuses_nul(client: TestClient) -> None:
    # Every string a request may carry (but content, ids, times and enums)
    # has a pattern that refuses U+0000, so no client is told it may send one.
    document = client.get("/openapi.json").json()
    components = document["components"]["schemas"]
    loose: list[str] = []
    seen: set[str] = set()

    def visit(schema: dict[str, Any], where: str) -> None:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                seen.add(name)
                visit(components[name], name)
            return
        for key in ("anyOf", "oneOf", "allOf"):
            for i, part in enumerate(schema.get(key, [])):
                visit(part, f"{where}/{key}/{i}")
        for name, sub in schema.get("properties", {}).items():
            visit(sub, f"{where}/{name}")
        if isinstance(schema.get("items"), dict):
            visit(schema["items"], f"{where}/items")
        if schema.get("type") != "string" or "enum" in schema or "const" in schema:
            return
        if schema.get("format") in {"uuid", "date-time"}:
            return
        pattern = schema.get("pattern")
        if pattern is None or re.search(pattern, "a\u0000b"):
            loose.append(where)

    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                visit(parameter["schema"], f"{method} {path} {parameter['name']}")
            for media in operation.get("requestBody", {}).get("content", {}).values():
                visit(media["schema"], f"{method} {path} body")
    # The content of observations and versions is stored as bytes: anything goes.
    content = [w for w in loose if w.endswith("/content")]
    assert [w for w in loose if w not in content] == []
    assert seen >= {"MemoryCreate", "RecallCreate", "ForgetCreate", "BatchCreate"}


# -- What the document says a value is, is what the service reads -------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/recall", {"query": "x", "include_archived": 0}),
        ("/v1/recall", {"query": "x", "k": "5"}),
        ("/v1/recall", {"query": "x", "k": True}),
        ("/v1/observations", {"content": "x", "transient": 1}),
        ("/v1/observations", {"content": "x", "captured_at": 5}),
        ("/v1/observations", {"content": "x", "captured_at": "2020-01-01"}),
        ("/v1/memories", {**MEMORY, "trust": True}),
        ("/v1/memories", {**MEMORY, "trust": "0.5"}),
        ("/v1/tenant/retention", {"transient_hours": True}),
        ("/v1/erasures", {"observation_ids": [], "memory_ids": [], "reason": "r"}),
        ("/v1/erasures", {"reason": "r"}),
    ],
)
def test_values_the_document_refuses_are_refused(
    client: TestClient, tenant: Tenant, snapshot: Any, path: str, body: dict[str, Any]
) -> None:
    before = snapshot()
    method = "PUT" if path.endswith("retention") else "POST"
    response = client.request(method, path, json=body, headers=tenant.headers())
    assert _refused(response) == "validation-error"
    assert snapshot() == before


def test_an_integral_number_is_an_integer_as_json_schema_says(
    client: TestClient, tenant: Tenant
) -> None:
    response = client.put(
        "/v1/tenant/retention", json={"transient_hours": 2.0}, headers=tenant.headers()
    )
    assert response.status_code == 200, response.text
    assert response.json()["transient_hours"] == 2


@pytest.mark.parametrize(
    "query",
    [
        "as_of=0.5",
        "as_of=1700000000",
        "as_of=2020-01-01",
        "include_archived=0",
        "include_archived=yes",
        "include_content=1",
    ],
)
def test_query_values_are_read_as_published(client: TestClient, tenant: Tenant, query: str) -> None:
    response = client.get(f"/v1/memories?{query}", headers=tenant.headers())
    assert _refused(response) == "validation-error"


def test_a_future_capture_time_is_refused_as_its_description_says(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    before = snapshot()
    later = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    response = post(
        client, "/v1/observations", {"content": "x", "captured_at": later}, tenant.headers()
    )
    assert _refused(response) == "invalid-input"
    assert snapshot() == before


def test_the_retention_maxima_are_published_from_the_settings(runtime: Runtime) -> None:
    settings = ApiSettings(raw_retention_hours=100, transient_retention_hours=7)
    with TestClient(create_app(settings, runtime)) as client:
        document = client.get("/openapi.json").json()
    fields = document["components"]["schemas"]["RetentionUpdate"]["properties"]
    maxima = {name: field["anyOf"][0]["maximum"] for name, field in fields.items()}
    assert maxima == {"raw_hours": 100, "transient_hours": 7}


def test_retention_above_the_published_maximum_is_refused(
    client: TestClient, tenant: Tenant
) -> None:
    document = client.get("/openapi.json").json()
    field = document["components"]["schemas"]["RetentionUpdate"]["properties"]["transient_hours"]
    ceiling = field["anyOf"][0]["maximum"]
    headers = tenant.headers()
    ok = client.put("/v1/tenant/retention", json={"transient_hours": ceiling}, headers=headers)
    assert ok.status_code == 200, ok.text
    over = client.put(
        "/v1/tenant/retention", json={"transient_hours": ceiling + 1}, headers=headers
    )
    assert _refused(over) == "invalid-input"


# -- Combinations the document cannot forbid are given a meaning --------------------------


def test_at_position_and_as_of_together_read_at_the_earlier(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    drain_until_caught_up(runtime)
    later = datetime.now(UTC).isoformat()
    position = memory["position"]
    both = client.get(
        f"/v1/memories/{memory['id']}",
        headers=headers,
        params={"at_position": position, "as_of": later},
    )
    alone = client.get(
        f"/v1/memories/{memory['id']}", headers=headers, params={"at_position": position}
    )
    assert both.status_code == 200, both.text
    assert both.json() == alone.json()
    listed = client.get(
        "/v1/memories", headers=headers, params={"at_position": 0, "as_of": later}
    ).json()
    assert listed["items"] == [] and listed["position"] == 0


def test_an_as_of_listing_has_nothing_pending(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    drain_until_caught_up(runtime)
    params: dict[str, Any] = {"at_position": memory["position"]}
    pending = client.get("/v1/memories", headers=headers, params={**params, "status": "pending"})
    assert pending.status_code == 200 and pending.json()["items"] == []
    current = client.get("/v1/memories", headers=headers, params={**params, "status": "current"})
    assert [i["id"] for i in current.json()["items"]] == [memory["id"]]


def test_two_different_models_narrow_a_withdrawal_to_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    before = snapshot()
    response = post(client, "/v1/proposers/model=a/withdraw?model=b", {}, tenant.headers())
    assert _refused(response, 404) == "not-found"
    assert snapshot() == before


# -- The role first, then the body ----------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "method", "path", "body"),
    [
        ("reader", "POST", "/v1/memories", {"content": 5}),
        ("reader", "POST", "/v1/observations", {}),
        ("reader", "POST", "/v1/batch", {"items": []}),
        ("reader", "POST", f"/v1/memories/{NOWHERE}/forget", {"reason": ""}),
        ("reader", "POST", "/v1/proposers/model=m/withdraw", {"model": ""}),
        ("writer", "POST", "/v1/erasures", {"reason": ""}),
        ("writer", "PUT", "/v1/tenant/retention", {"raw_hours": "x"}),
    ],
)
def test_a_caller_who_may_not_write_learns_nothing_about_the_body(
    client: TestClient, tenant: Tenant, role: str, method: str, path: str, body: Any
) -> None:
    response = client.request(method, path, json=body, headers=tenant.headers(role))
    assert _refused(response, 403) == "forbidden"


def test_a_five_thousand_digit_integer_is_refused_as_a_value(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    before = snapshot()
    raw = b'{"query": "x", "k": ' + b"9" * 5000 + b"}"
    response = client.post(
        "/v1/recall",
        content=raw,
        headers={**tenant.headers(), "Content-Type": "application/json"},
    )
    assert _refused(response) == "invalid-input"
    assert snapshot() == before


# -- The answers a route gives are in the document ---------------------------------------------


def test_the_document_lists_the_answers_routes_really_give(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "428" in paths["/v1/tenant"]["delete"]["responses"]
    for path in ("/v1/memories/{memory_id}/edges", "/v1/erasures", "/v1/batch"):
        assert "200" in paths[path]["post"]["responses"], path  # replays
    content = paths["/v1/observations/{observation_id}/content"]["get"]
    assert "410" in content["responses"]  # content-expired, content-erased
    assert list(content["responses"]["200"]["content"]) == ["*/*"]  # as captured
    assert "410" in paths["/v1/memories/{memory_id}/candidates"]["get"]["responses"]


def test_a_405_names_the_allowed_methods(client: TestClient, tenant: Tenant) -> None:
    for method, path in (("DELETE", "/v1/recall"), ("PUT", "/v1/memories/batch")):
        response = client.request(method, path, headers=tenant.headers())
        assert response.status_code == 405
        assert problem_slug(response) == "method-not-allowed"
        assert response.headers["allow"]


def test_a_position_beyond_bigint_is_refused_by_its_published_bound(
    client: TestClient, tenant: Tenant
) -> None:
    # Once a 500 (the database's "bigint out of range"), then an unstated 422.
    for path in ("/v1/memories", f"/v1/memories/{uuid.uuid4()}", "/v1/events"):
        key = "after" if path == "/v1/events" else "at_position"
        response = client.get(path, headers=tenant.headers(), params={key: 2**63})
        assert _refused(response) == "validation-error", path


def test_a_value_the_database_refuses_is_the_callers_422_not_a_500(runtime: Runtime) -> None:
    # Defence in depth: should a value pass validation that PostgreSQL refuses
    # (a driver DataError), the caller gets invalid-input, never a 500.
    app = create_app(ApiSettings(), runtime)

    def refused_by_the_database() -> None:
        with runtime.log.datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT 'not a number'::int")

    app.add_api_route("/test-only/data-error", refused_by_the_database)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/test-only/data-error")
    assert _refused(response) == "invalid-input"
