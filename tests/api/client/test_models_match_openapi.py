"""The client's own models hold to the server's OpenAPI document, so the two cannot drift.

Every endpoint's ``Call`` is built with every argument it takes, then held to
the operation the document publishes at its method and path:

- its answer model has exactly the fields of the success response's schema, by
  the names served, each required only where the server always sends it (and
  defaulting as the server does), with a type that accepts every value the
  schema allows: each enum value, each branch of a union, integers where a number
  is read, no format or bound the server does not promise;
- its JSON body validates against the server's request model for that operation
  (the one the document names), and each query parameter it sends is one the
  operation declares.

The client's models are read through their own JSON schema (validation mode, by
the served names), the server's through the document, so neither side's Python
names matter; only what goes over the wire does.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, get_type_hints
from uuid import UUID

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter

from palimpsest.api import schemas as server_schemas
from palimpsest.api.client import _beliefs as beliefs
from palimpsest.api.client import _calls as calls
from palimpsest.api.client import _records as records
from palimpsest.api.client import models
from palimpsest.api.client._calls import Call
from palimpsest.api.client._records import EventPublic

Schema = dict[str, Any]

_ID = UUID(int=42)
_WHEN = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)

# A value for each argument any call takes, valid where the server's schema says
# how; a new argument without one fails the test until it gets one.
_ARGUMENTS: dict[str, Any] = {
    "action": "archive",
    "activity_window_days": 14.0,
    "after": 0,
    "as_of": _WHEN,
    "at_position": 5,
    "auto_apply_extractive_merges": True,
    "auto_archive_decayed": True,
    "candidates": "wait",
    "captured_at": _WHEN,
    "confirm": "a-confirmation-token",
    "confirm_bulk": True,
    "content": "Deploys run at 09:00 UTC.",
    "cursor": "bmV4dA",
    "cycle_id": _ID,
    "daily_calls": 3,
    "daily_tokens": 1000,
    "decision_id": _ID,
    "dry_run": True,
    "duplicate_floor": 0.95,
    "edge_id": _ID,
    "enabled": True,
    "erasure_id": _ID,
    "evidence": [{"observation_id": _ID, "start": 0, "end": 7}],
    "fade_below": 0.45,
    "half_life_days": {
        "fact": 365.0,
        "preference": 365.0,
        "decision": 180.0,
        "blocker": 30.0,
        "note": 30.0,
        "event": 7.0,
    },
    "ids": [_ID, _ID],
    "importance": 0.7,
    "importance_floor": 0.9,
    "include_archived": True,
    "include_content": True,
    "include_reflections": True,
    "items": [
        {"op": "create_observation", "content": "The window is 09:00."},
        {"op": "create_memory", "type": "fact", "scope": "ops", "content": "At 09:00"},
        {"op": "add_version", "memory_id": "$1", "content": "At 10:00"},
        {"op": "add_edge", "memory_id": "$1", "kind": "extends", "target_id": str(_ID)},
    ],
    "judge": "operator:ann",
    "k": 5,
    "kind": "supersedes",
    "limit": 10,
    "media_type": "text/markdown",
    "memory_id": _ID,
    "memory_ids": [_ID],
    "merge_similarity_floor": 0.92,
    "min_similarity": 0.5,
    "mode": "text",
    "model": "small-model",
    "model_id": "small-model",
    "observation_id": _ID,
    "observation_ids": [_ID],
    "other_id": _ID,
    "principal_id": "ann",
    "project": "infra",
    "project_under": "infra",
    "proposal_id": _ID,
    "prune_below": 0.35,
    "query": "when do we deploy?",
    "raw_hours": 24,
    "reason": "the team decided",
    "reflections_enabled": True,
    "resolution": "supersede",
    "restore": True,
    "schedule_minutes": 90,
    "scope": "ops",
    "source": "slack",
    "status": "current",
    "supersedes": [_ID, _ID],
    "target_id": _ID,
    "topic": "deploys",
    "transient": True,
    "transient_hours": 2,
    "trust": 0.5,
    "type": "fact",
    "verdicts": [
        {
            "memory_id": _ID,
            "action": "supersede",
            "related_memory_id": _ID,
            "confidence": 0.9,
            "note": "the newer one says it",
        }
    ],
    "version_id": _ID,
    "wait": 1.5,
    "weights": {"importance": 1.0, "recency": 1.0, "scope": 0.5, "trust": 0.5},
}
# Where two calls take an argument of the same name with different values.
_ARGUMENTS_OF: dict[str, dict[str, Any]] = {"settle": {"resolution": "both_stand"}}

# Keywords that constrain a value: a client schema may carry one only where the
# server's promises the same.
_BOUNDS = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
)
_JSON_TYPES: dict[type, str] = {str: "string", bool: "boolean", int: "integer", float: "number"}


@pytest.fixture(scope="module")
def document(client: TestClient) -> Schema:
    answer = client.get("/openapi.json")
    assert answer.status_code == 200
    return dict(answer.json())


def _builders() -> Iterator[tuple[str, Callable[..., Call[Any]]]]:
    for name in calls.__all__:
        value = getattr(calls, name)
        if inspect.isfunction(value):
            yield name, value


def _every_argument(build: Callable[..., Call[Any]]) -> Call[Any]:
    """The call with every argument it takes given (ids positional, the rest by name)."""
    positional: list[Any] = []
    named: dict[str, Any] = {}
    arguments = _ARGUMENTS | _ARGUMENTS_OF.get(build.__name__, {})
    for parameter in inspect.signature(build).parameters.values():
        value = arguments[parameter.name]
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(value)
        else:
            named[parameter.name] = value
    return build(*positional, **named)


def _operation(document: Schema, call: Call[Any]) -> Schema:
    """The operation the document publishes for the call's method and path (a literal
    path before a template that also matches it, as the router routes)."""
    found: list[tuple[int, Schema]] = []
    for template, item in document["paths"].items():
        parts = re.split(r"(\{[^/}]+\})", template)
        pattern = "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts)
        if re.fullmatch(pattern, call.path) and call.method.lower() in item:
            found.append((template.count("{"), item[call.method.lower()]))
    assert found, f"{call.method} {call.path} is no operation of the document"
    return min(found, key=lambda pair: pair[0])[1]


def _success_schema(operation: Schema) -> Schema | None:
    """The JSON schema of the operation's first success answer (None: not JSON)."""
    for status, response in sorted(operation["responses"].items()):
        content = response.get("content", {}).get("application/json")
        if status.startswith("2") and content is not None:
            return dict(content["schema"])
    return None


def _server_models() -> dict[str, type[BaseModel]]:
    """The server's request and response models, by the component name each publishes
    (its class name)."""
    found: dict[str, type[BaseModel]] = {}
    for info in pkgutil.iter_modules(server_schemas.__path__):
        module = importlib.import_module(f"{server_schemas.__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel):
                found.setdefault(value.__name__, value)
    return found


def _request_model(document: Schema, operation: Schema) -> tuple[type[BaseModel], bool] | None:
    """The server's model of the operation's body, and whether the body is required."""
    body = operation.get("requestBody")
    if body is None:
        return None
    schema = body["content"]["application/json"]["schema"]
    refs = [s["$ref"] for s in [schema, *schema.get("anyOf", [])] if "$ref" in s]
    assert len(refs) == 1, schema
    name = refs[0].rsplit("/", 1)[1]
    assert name in document["components"]["schemas"]
    return _server_models()[name], bool(body.get("required"))


class _Comparison:
    """Differences between what the server may send (the document) and what a client
    model reads (its JSON schema): each one an answer the client would refuse or
    misread."""

    def __init__(
        self,
        server_defs: dict[str, Schema],
        client_defs: dict[str, Schema],
        seen: set[tuple[str, str]] | None = None,
    ) -> None:
        self._server = server_defs
        self._client = client_defs
        self._seen = set(seen or ())
        """The pairs of models compared already (each is compared once)."""
        self.problems: list[str] = []

    @classmethod
    def of(cls, document: Schema, client: Schema) -> _Comparison:
        """A comparison of the client's schema ``client`` with the server's ``document``."""
        return cls(document["components"]["schemas"], client.get("$defs", {}))

    def _resolve(self, schema: Schema, defs: dict[str, Schema]) -> tuple[Schema, str | None]:
        name = None
        while "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            schema = defs[name]
        return schema, name

    def compare(self, client: Schema, server: Schema, where: str) -> None:
        """Record where ``client`` would refuse or misread a value ``server`` allows."""
        client, client_name = self._resolve(client, self._client)
        server, server_name = self._resolve(server, self._server)
        if client_name and server_name:
            if (client_name, server_name) in self._seen:
                return
            self._seen.add((client_name, server_name))
        union: list[Schema] = server.get("anyOf") or server.get("oneOf") or []
        for branch in union:  # the client reads each value any branch allows
            self.compare(client, branch, where)
        if union:
            return
        if "anyOf" in client or "oneOf" in client:
            self._compare_to_a_branch(client, server, where)
            return
        self._compare_one(client, server, where)

    def _compare_to_a_branch(self, client: Schema, server: Schema, where: str) -> None:
        union = client.get("anyOf") or client["oneOf"]
        branches = [self._resolve(branch, self._client)[0] for branch in union]
        tags = {k: v["const"] for k, v in server.get("properties", {}).items() if "const" in v}
        for branch in branches:
            fields = branch.get("properties", {})
            if tags and all(fields.get(k, {}).get("const") == v for k, v in tags.items()):
                # A discriminated union: held to the branch of the same tag.
                self.compare(branch, server, where)
                return
        for branch in branches:
            trial = _Comparison(self._server, self._client, self._seen)
            trial.compare(branch, server, where)
            if not trial.problems:
                return
        self.problems.append(f"{where}: no branch of the client reads {_shape(server)}")

    def _compare_one(self, client: Schema, server: Schema, where: str) -> None:
        if not _constrains(client):
            return
        for keyword in _BOUNDS:
            if keyword in client and client.get(keyword) != server.get(keyword):
                self.problems.append(f"{where}: the client demands {keyword}={client[keyword]!r}")
        values = [server["const"]] if "const" in server else server.get("enum")
        if values is not None:
            refused = [v for v in values if not _reads_value(client, v)]
            if refused:
                self.problems.append(f"{where}: the client refuses {refused!r}")
            return
        if "const" in client or "enum" in client:
            self.problems.append(f"{where}: the client reads only some of {_shape(server)}")
            return
        kind, reads = server.get("type"), client.get("type")
        if kind is None or not (reads == kind or (reads, kind) == ("number", "integer")):
            self.problems.append(f"{where}: the client reads {reads}, the server sends {kind}")
            return
        if kind == "array":
            self.compare(client.get("items", {}), server.get("items", {}), f"{where}[]")
        elif kind == "object":
            self._compare_objects(client, server, where)

    def _compare_objects(self, client: Schema, server: Schema, where: str) -> None:
        if "properties" not in server:
            if "properties" in client:
                self.problems.append(f"{where}: the client reads a model, the server sends a map")
            else:
                self.compare(_values(client), _values(server), f"{where}{{}}")
            return
        if "properties" not in client:
            self.problems.append(f"{where}: the client reads a map, the server sends a model")
            return
        fields, served = client["properties"], server["properties"]
        if set(fields) != set(served):
            missing, unknown = sorted(set(served) - set(fields)), sorted(set(fields) - set(served))
            self.problems.append(f"{where}: fields the client lacks {missing}, unknown {unknown}")
        required, always = set(client.get("required", [])), set(server.get("required", []))
        for name in sorted(set(fields) & set(served)):
            at = f"{where}.{name}"
            if name in required and name not in always:
                self.problems.append(f"{at}: the client requires it, the server may leave it out")
            default = served[name].get("default")
            if name not in always and fields[name].get("default", default) != default:
                self.problems.append(f"{at}: the client defaults otherwise")
            self.compare(fields[name], served[name], at)


def _values(schema: Schema) -> Schema:
    values = schema.get("additionalProperties", {})
    return {} if values is True else dict(values)


def _constrains(schema: Schema) -> bool:
    """Whether a schema refuses any JSON value."""
    return any(k in schema for k in ("type", "enum", "const", "anyOf", "oneOf", "properties"))


def _reads_value(client: Schema, value: Any) -> bool:
    if "const" in client:
        return bool(client["const"] == value)
    if "enum" in client:
        return value in client["enum"]
    kind = "null" if value is None else _JSON_TYPES[type(value)]
    return client.get("type") == kind or (client.get("type"), kind) == ("number", "integer")


def _shape(schema: Schema) -> str:
    return json.dumps({k: v for k, v in schema.items() if k not in ("description", "title")})[:200]


def _client_schema(tp: Any) -> Schema:
    return TypeAdapter(tp).json_schema(mode="validation", by_alias=True)


def _answer_models() -> set[str]:
    """Every answer model the client declares (its bases for others left out)."""
    declared = {
        value.__name__
        for module in (models, beliefs, records)
        for name in module.__all__
        if isinstance(value := getattr(module, name), type) and issubclass(value, BaseModel)
    }
    return declared - {"Answer", "MemoryKind", "MemoryAttributes"}


def test_every_answer_model_has_the_fields_and_types_of_its_server_schema(
    document: Schema,
) -> None:
    problems: list[str] = []
    checked: set[str] = set()
    for name, build in _builders():
        call = _every_argument(build)
        expected = _success_schema(_operation(document, call))
        if call.returns is None or call.returns is bytes:
            assert expected is None, f"{name} reads no JSON answer, the server sends one"
            continue
        assert expected is not None, f"{name} reads a JSON answer, the server sends none"
        schema = _client_schema(call.returns)
        checked |= set(schema.get("$defs", {})) | {schema.get("title", "")}
        comparison = _Comparison.of(document, schema)
        comparison.compare(schema, expected, name)
        problems += comparison.problems
    # The event stream's entries are the feed's events: Server-Sent Events have no
    # schema in OpenAPI, so the entry is held to the feed's schema of an event.
    entry = _client_schema(EventPublic)
    comparison = _Comparison.of(document, entry)
    comparison.compare(entry, {"$ref": "#/components/schemas/EventRecord"}, "stream_events")
    problems += comparison.problems
    assert problems == [], "\n".join(problems)
    assert _answer_models() <= checked | {"EventPublic"}


def test_every_request_the_client_sends_is_one_the_server_reads(document: Schema) -> None:
    for name, build in _builders():
        call = _every_argument(build)
        operation = _operation(document, call)
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
        assert set(call.params) <= declared, (name, set(call.params) - declared)
        body = _request_model(document, operation)
        if body is None:
            assert call.json is None, f"{name} sends a body the operation does not read"
            continue
        model, required = body
        assert call.json is not None or not required, f"{name} sends no body"
        if call.json is not None:
            # As FastAPI validates a body: the decoded JSON, in Python mode.
            model.model_validate(json.loads(json.dumps(call.json)))


def test_the_arguments_tried_hold_every_field_of_the_request_types() -> None:
    # Evidence and verdicts are the client's own request types: every key they
    # allow is sent above, so the server's request models see each one.
    tried = {"evidence": calls.Evidence, "verdicts": calls.Verdict}
    for argument, typed in tried.items():
        keys = set(get_type_hints(typed))
        assert all(set(item) == keys for item in _ARGUMENTS[argument]), argument
