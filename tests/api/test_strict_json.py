"""One strict JSON parser for every body: UTF-8 only, each key once, JSON's own numbers,
and a depth limit with a problem type of its own; a refused body writes nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from palimpsest.api._strict_json import MAX_DEPTH, parse_json
from tests.api.helpers import problem_slug
from tests.conftest import Tenant

_MEMORY = '{"type": "fact", "scope": "user", "content": "Lives in Lyon"}'
_TWICE = '{"type": "fact", "scope": "user", "content": "Lives in Lyon", "content": "Paris"}'


def _nested(depth: int) -> str:
    return '{"type": "fact", "scope": "user", "content": "x", "metadata": {"a": ' + (
        "[" * depth + "]" * depth + "}}"
    )


@pytest.mark.parametrize(
    ("raw", "slug"),
    [
        (_MEMORY.encode("utf-16"), "malformed-json"),
        (_MEMORY.encode("utf-16-le"), "malformed-json"),
        (b"\xef\xbb\xbf" + _MEMORY.encode(), "malformed-json"),
        (_TWICE.encode(), "duplicate-key"),
        (_MEMORY.replace('"Lives in Lyon"', "NaN").encode(), "malformed-json"),
        (_nested(MAX_DEPTH + 1).encode(), "json-too-deep"),
        (_nested(100_000).encode(), "json-too-deep"),
    ],
    ids=["utf-16", "utf-16-le", "bom", "duplicate-key", "nan", "just-too-deep", "very-deep"],
)
@pytest.mark.parametrize("path", ["/v1/memories", "/v1/observations"])
def test_a_body_read_two_ways_is_refused_and_writes_nothing(
    client: TestClient, tenant: Tenant, snapshot: Any, raw: bytes, slug: str, path: str
) -> None:
    before = snapshot()
    # /v1/memories with this exact media type is a plain request, answered without
    # FastAPI's dependency solving: it is held to the same parser.
    response = client.post(
        path, content=raw, headers={**tenant.headers(), "Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert problem_slug(response) == slug
    assert snapshot() == before


def test_brackets_inside_strings_are_text_not_depth(client: TestClient, tenant: Tenant) -> None:
    body = {"type": "fact", "scope": "user", "content": "[{" * 500 + " is how it starts"}
    headers = {**tenant.headers(), "Content-Type": "application/json"}
    response = client.post("/v1/memories", content=json.dumps(body), headers=headers)
    assert response.status_code == 201, response.text


def test_a_duplicate_key_inside_a_batch_item_is_refused(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    before = snapshot()
    raw = '{"items": [' + _TWICE.replace("{", '{"op": "create_memory", ', 1) + "]}"
    response = client.post(
        "/v1/batch", content=raw, headers={**tenant.headers(), "Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert problem_slug(response) == "duplicate-key"
    assert snapshot() == before


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@given(_JSON)
def test_every_json_document_a_client_sends_reads_back_as_sent(value: Any) -> None:
    assert parse_json(json.dumps(value, ensure_ascii=False).encode()) == value
