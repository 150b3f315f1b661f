"""Fuzz the whole API from its own OpenAPI document: every operation, every check.

Schemathesis reads ``/openapi.json`` from a real server (uvicorn on loopback,
the in-process drain loop running, as ``palimpsest serve`` runs) and sends
each operation generated requests, valid and invalid, with a real admin
token of a fresh tenant, which holds an open proposal of every kind (the
proposal routes' cases are pointed at them in turn). Every response must pass
every built-in check: no 5xx, status codes, content types, headers and bodies as documented,
schema-valid requests accepted, schema-violating ones refused, requests
without a token refused, wrong methods answered 405 with ``Allow``.

The example count is bounded so that the default run stays under two
minutes on a 2-core machine; ``tests/benchmarks/fuzz.py`` runs the same test
on demand with 10,000 cases and more (docs/fuzzing.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from palimpsest.projections.runtime import Runtime
from tests.api.fuzzing import (
    FuzzTarget,
    drop_unissued_cursor,
    move_future_capture_times_to_the_past,
    serve_for_fuzzing,
    use_a_seeded_proposal,
)
from tests.api.helpers import problem_slug
from tests.api.pytest_internals import give_schemathesis_a_node_id

EXAMPLES = int(os.environ.get("PALIMPSEST_FUZZ_EXAMPLES", "5"))
"""Generated examples per operation (besides the coverage phase's own cases);
the on-demand script raises it."""


@pytest.fixture(scope="module")
def fuzz_target(runtime: Runtime) -> Iterator[FuzzTarget]:
    with serve_for_fuzzing(runtime) as target:
        yield target
    report = os.environ.get("PALIMPSEST_FUZZ_REPORT")
    if report:  # the on-demand script's figures
        figures = {"cases": target.cases, "failed": target.failed, "statuses": target.statuses}
        Path(report).write_text(json.dumps(figures))
    # Most requests must get past authentication, or the run proved nothing.
    assert target.statuses[401] < sum(target.statuses.values()) / 2, target.statuses


@pytest.fixture(scope="module")
def api_schema(fuzz_target: FuzzTarget) -> schemathesis.BaseSchema:
    return fuzz_target.schema


@pytest.fixture(autouse=True)
def _node_id_for_schemathesis(request: pytest.FixtureRequest) -> None:
    give_schemathesis_a_node_id(request.node)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_passes_every_check(
    case: schemathesis.Case[Any], fuzz_target: FuzzTarget
) -> None:
    drop_unissued_cursor(case)
    move_future_capture_times_to_the_past(case)
    use_a_seeded_proposal(case, fuzz_target)
    fuzz_target.cases += 1
    try:
        response = case.call_and_validate(session=fuzz_target.session)
    except BaseException:  # schemathesis raises an exception group
        fuzz_target.failed += 1
        raise
    fuzz_target.statuses[response.status_code] += 1


def test_a_wrong_method_names_every_allowed_one(client: TestClient) -> None:
    # GET and POST are two routes at one path: the 405 names both (RFC 9110).
    response = client.request("PUT", "/v1/memories")
    assert response.status_code == 405
    assert problem_slug(response) == "method-not-allowed"
    assert {m.strip() for m in response.headers["allow"].split(",")} >= {"GET", "POST"}


def test_optional_parameters_are_published_without_null(client: TestClient) -> None:
    # HTTP has no null query or header value: an absent parameter is the None.
    document = client.get("/openapi.json").json()
    nullable = [
        (path, parameter["name"])
        for path, item in document["paths"].items()
        for operation in item.values()
        for parameter in operation.get("parameters", [])
        if {"type": "null"} in parameter["schema"].get("anyOf", [])
    ]
    assert nullable == []
