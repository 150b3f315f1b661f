"""The MCP tools through the SDK's in-process client, on real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from mcp import Client

from palimpsest.api.mcp._server import build_server
from palimpsest.projections.runtime import Runtime
from tests.api.mcp.helpers import ADMIN_TOOLS, TOOLS, backend_for, ok, problem, problem_type
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up

_T = TypeVar("_T")
_USER = {"type": "preference", "scope": "user"}


def _with_client(
    runtime: Runtime, token: str | None, scenario: Callable[[Client], Awaitable[_T]], **kw: Any
) -> _T:
    async def run() -> _T:
        async with Client(build_server(backend_for(runtime, token), **kw)) as client:
            return await scenario(client)

    return asyncio.run(run())


def _open_objects(schema: Any) -> list[Any]:
    """Every object schema in ``schema`` that takes properties it does not declare."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" and (
            "properties" not in schema or schema.get("additionalProperties") not in (None, False)
        ):
            found.append(schema)
        for value in schema.values():
            found += _open_objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _open_objects(value)
    return found


def test_few_tools_with_typed_schemas_and_annotations(runtime: Runtime, tenant: Tenant) -> None:
    async def scenario(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _with_client(runtime, tenant.token("writer"), scenario)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert _open_objects(tool.input_schema) == [], tool.name
        assert _open_objects(tool.output_schema) == [], tool.name
        assert tool.annotations is not None and tool.description
    assert tools["forget"].annotations.destructive_hint is False
    assert tools["forget"].annotations.idempotent_hint is True
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["history"].annotations.read_only_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    # The tenant is never an argument: nothing in any tool names it.
    for tool in tools.values():
        assert not {"tenant", "tenant_id", "principal", "user_id"} & set(
            tool.input_schema["properties"]
        )

    admin = _with_client(runtime, tenant.admin.token, scenario, admin_tools=True)
    assert {t.name for t in admin} == TOOLS | ADMIN_TOOLS
    erase = next(t for t in admin if t.name == "erase")
    assert erase.annotations is not None and erase.annotations.destructive_hint is True


def test_remember_recall_revise_forget_history(runtime: Runtime, tenant: Tenant) -> None:
    source = "Standup notes: Ana said the release moves to Friday. Ticket PAL-123 tracks it."

    async def write(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        remembered = ok(
            await client.call_tool(
                "remember",
                {
                    "content": "The release is on Friday.",
                    "type": "decision",
                    "scope": "team",
                    "project": "apollo",
                    "source_text": source,
                    "excerpt": "the release moves to Friday",
                },
            )
        )
        plain = ok(
            await client.call_tool(
                "remember", {"content": "Ticket PAL-123 is open.", "type": "note", "scope": "user"}
            )
        )
        return remembered, plain

    token = tenant.token("writer")
    remembered, plain = _with_client(runtime, token, write)
    # Durable ids and log positions at once; the belief is pending until revision.
    assert remembered["status"] == "pending" and plain["status"] == "pending"
    assert remembered["observation_position"] < remembered["position"] < plain["position"]
    assert plain["observation_id"] is None
    memory_id = remembered["memory_id"]
    index_until_caught_up(runtime, tenant.id)

    async def read_and_change(client: Client) -> dict[str, Any]:
        recalled = ok(await client.call_tool("recall", {"query": "When is the release?"}))
        by_words = ok(await client.call_tool("recall", {"query": "PAL-123", "mode": "text"}))
        revised = ok(
            await client.call_tool(
                "revise", {"memory_id": memory_id, "content": "The release is on Monday."}
            )
        )
        drain_until_caught_up(runtime)
        forgotten = ok(
            await client.call_tool(
                "forget", {"memory_id": memory_id, "reason": "the release was cancelled"}
            )
        )
        again = ok(
            await client.call_tool(
                "forget", {"memory_id": memory_id, "reason": "the release was cancelled"}
            )
        )
        drain_until_caught_up(runtime)
        after = ok(await client.call_tool("recall", {"query": "When is the release?"}))
        now = ok(await client.call_tool("history", {"memory_id": memory_id}))
        then = ok(
            await client.call_tool(
                "history", {"memory_id": memory_id, "at_position": remembered["position"]}
            )
        )
        later = ok(
            await client.call_tool(
                "history", {"memory_id": memory_id, "as_of": datetime.now(UTC).isoformat()}
            )
        )
        before = await client.call_tool(
            "history", {"memory_id": memory_id, "as_of": "2000-01-01T00:00:00Z"}
        )
        return {
            "later": later,
            "before": before,
            "recalled": recalled,
            "by_words": by_words,
            "revised": revised,
            "forgotten": forgotten,
            "again": again,
            "after": after,
            "now": now,
            "then": then,
        }

    seen = _with_client(runtime, token, read_and_change)
    [best, *_] = seen["recalled"]["items"]
    assert best["id"] == memory_id and best["status"] == "current"
    assert best["content"] == "The release is on Friday."
    assert best["belief"]["archived"] is False and best["belief"]["grade"]
    assert best["why"]["similarity"] > 0 and best["why"]["decided_by"] == "first"
    [word] = seen["by_words"]["items"]  # an identifier a sentence embedding blurs
    assert word["id"] == plain["memory_id"] and word["why"]["mode"] == "text"
    assert word["why"]["text_rank"] == 1 and word["why"]["similarity"] is None
    assert seen["revised"]["version_id"] != remembered["version_id"]
    assert seen["revised"]["position"] > plain["position"]
    assert seen["forgotten"]["kind"] == "forget" and seen["forgotten"]["replayed"] is False
    assert seen["again"]["replayed"] is True  # idempotent: nothing recorded twice
    assert seen["again"]["decision_id"] == seen["forgotten"]["decision_id"]
    assert memory_id not in [i["id"] for i in seen["after"]["items"]]
    _history_says_what_was_believed_when(seen, remembered["position"])


def _history_says_what_was_believed_when(seen: dict[str, Any], written_at: int) -> None:
    now, then = seen["now"], seen["then"]
    assert [v["content"] for v in now["versions"]] == [
        "The release is on Friday.",
        "The release is on Monday.",
    ]
    assert now["status"] == "current" and now["belief"]["archived"] is True
    assert now["belief"]["archived_reason"] == "the release was cancelled"
    assert now["content"] == "The release is on Monday."
    assert [e["position"] for e in now["events"]] == sorted(e["position"] for e in now["events"])
    assert then["status"] == "as_of" and then["position"] == written_at
    assert then["content"] == "The release is on Friday." and not then["belief"]["archived"]
    later = seen["later"]  # by time: after the forget, as an as-of read
    assert later["status"] == "as_of" and later["belief"]["archived"] is True
    assert later["content"] == "The release is on Monday."
    assert problem(seen["before"])["type"] == problem_type("not-found")  # it did not exist


def test_refusals_are_tool_errors_that_write_nothing(
    runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    unknown = "00000000-0000-4000-8000-000000000000"

    async def scenario(client: Client) -> dict[str, Any]:
        results: dict[str, Any] = {
            "unknown": await client.call_tool("forget", {"memory_id": unknown, "reason": "x"}),
            "excerpt": await client.call_tool(
                "remember",
                {
                    "content": "A claim.",
                    "type": "note",
                    "scope": "user",
                    "source_text": "Some text.",
                    "excerpt": "other text",
                },
            ),
            "orphan": await client.call_tool(
                "remember", {"content": "A", "type": "note", "scope": "user", "excerpt": "A"}
            ),
            "untyped": await client.call_tool("remember", {"content": "A", "scope": "user"}),
            "blank": await client.call_tool(
                "remember", {"content": "   ", "type": "note", "scope": "user"}
            ),
            "schema": await client.call_tool("recall", {"query": "x", "k": 0}),
            "history": await client.call_tool("history", {"memory_id": unknown}),
        }
        # The session survived every refusal.
        results["tools"] = len((await client.list_tools()).tools)
        return results

    writer, reader = tenant.token("writer"), tenant.token("reader")
    before = snapshot()
    results = _with_client(runtime, writer, scenario)
    assert problem(results["unknown"])["type"] == problem_type("not-found")
    assert problem(results["excerpt"])["type"] == problem_type("invalid-input")
    assert problem(results["orphan"])["type"] == problem_type("invalid-input")
    assert problem(results["blank"])["type"] == problem_type("validation-error")
    # Refused by the tool's input schema: a problem document too, naming the argument.
    schema = problem(results["schema"])
    assert schema["type"] == problem_type("validation-error")
    assert [e["pointer"] for e in schema["errors"]] == ["/k"]
    untyped = problem(results["untyped"])  # as HTTP: a memory's type has no default
    assert untyped["type"] == problem_type("validation-error")
    assert [e["pointer"] for e in untyped["errors"]] == ["/type"]
    assert problem(results["history"])["type"] == problem_type("not-found")
    assert results["tools"] == len(TOOLS)
    assert snapshot()["log_head"] == before["log_head"]

    async def as_reader(client: Client) -> Any:
        return await client.call_tool(
            "remember", {"content": "A reader cannot write.", "type": "note", "scope": "user"}
        )

    refused = _with_client(runtime, reader, as_reader)
    assert problem(refused)["type"] == problem_type("forbidden")
    unknown_token = f"pal_{tenant.id.hex}_{'x' * 43}"
    refused = _with_client(runtime, unknown_token, as_reader)
    assert problem(refused)["type"] == problem_type("unauthenticated")
    assert snapshot()["log_head"] == before["log_head"]


def test_admin_tools_keep_their_roles(runtime: Runtime, tenant: Tenant) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        made = ok(
            await client.call_tool(
                "remember", {"content": "Pin me.", "type": "note", "scope": "user"}
            )
        )
        memory_id = made["memory_id"]
        return {
            "pin": await client.call_tool("pin", {"memory_id": memory_id}),
            "forget": await client.call_tool(
                "forget", {"memory_id": memory_id, "reason": "not needed"}
            ),
            "restore": await client.call_tool("restore", {"memory_id": memory_id}),
            "erase": await client.call_tool(
                "erase", {"memory_ids": [memory_id], "reason": "asked to"}
            ),
            "proposals": await client.call_tool("list_proposals", {}),
        }

    as_writer = _with_client(runtime, tenant.token("writer"), scenario, admin_tools=True)
    assert ok(as_writer["pin"])["kind"] == "pin"
    assert ok(as_writer["restore"])["kind"] == "restore"
    assert problem(as_writer["erase"])["type"] == problem_type("forbidden")
    assert ok(as_writer["proposals"])["items"] == []
    as_admin = _with_client(runtime, tenant.admin.token, scenario, admin_tools=True)
    erased = ok(as_admin["erase"])
    assert erased["status"] == "completed" and erased["removed_memories"] == 1


def test_a_retried_write_with_its_request_id_is_not_written_twice(
    runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    claim = {"content": "The wifi is 'larch'.", "type": "fact", "scope": "office"}

    async def scenario(client: Client) -> dict[str, Any]:
        first = ok(await client.call_tool("remember", {**claim, "request_id": "turn-7"}))
        head = snapshot()["log_head"]
        # The answer was lost: the agent calls again, the same call.
        again = ok(await client.call_tool("remember", {**claim, "request_id": "turn-7"}))
        written = snapshot()["log_head"] - head
        other = await client.call_tool(
            "remember", {**claim, "content": "Another claim.", "request_id": "turn-7"}
        )
        revised = ok(
            await client.call_tool(
                "revise",
                {"memory_id": first["memory_id"], "content": "It is 'oak'.", "request_id": "r1"},
            )
        )
        revised_again = ok(
            await client.call_tool(
                "revise",
                {"memory_id": first["memory_id"], "content": "It is 'oak'.", "request_id": "r1"},
            )
        )
        listed = ok(await client.call_tool("list", {"scope": "office"}))
        return {
            "first": first,
            "again": again,
            "written": written,
            "other": other,
            "revised": revised,
            "revised_again": revised_again,
            "listed": listed,
        }

    seen = _with_client(runtime, tenant.token("writer"), scenario)
    assert seen["again"]["memory_id"] == seen["first"]["memory_id"]
    assert seen["again"]["replayed"] is True and seen["first"]["replayed"] is False
    assert seen["written"] == 0
    assert problem(seen["other"])["type"] == problem_type("idempotency-key-reused")
    assert seen["revised_again"]["version_id"] == seen["revised"]["version_id"]
    assert seen["revised_again"]["replayed"] is True
    assert [i["id"] for i in seen["listed"]["items"]] == [seen["first"]["memory_id"]]


def test_revise_refuses_an_archived_memory_unless_it_restores_it(
    runtime: Runtime, tenant: Tenant
) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        old = ok(await client.call_tool("remember", {"content": "Prefers tea.", **_USER}))
        new = ok(
            await client.call_tool(
                "remember",
                {"content": "Prefers coffee.", **_USER, "supersedes": [old["memory_id"]]},
            )
        )
        gone = ok(await client.call_tool("remember", {"content": "Likes jazz.", **_USER}))
        forgot = ok(
            await client.call_tool(
                "forget", {"memory_id": gone["memory_id"], "reason": "said it was a joke"}
            )
        )
        change = {"content": "Prefers green tea."}
        return {
            "old": old,
            "new": new,
            "forgot": forgot,
            "superseded": await client.call_tool(
                "revise", {"memory_id": old["memory_id"], **change}
            ),
            "forgotten": await client.call_tool(
                "revise", {"memory_id": gone["memory_id"], **change}
            ),
            "restored": await client.call_tool(
                "revise", {"memory_id": old["memory_id"], **change, "restore": True}
            ),
            "history": ok(await client.call_tool("history", {"memory_id": old["memory_id"]})),
        }

    seen = _with_client(runtime, tenant.token("writer"), scenario)
    assert seen["new"]["superseded"] == [seen["old"]["memory_id"]]
    superseded = problem(seen["superseded"])
    assert superseded["type"] == problem_type("memory-superseded")
    assert seen["new"]["memory_id"] in superseded["detail"]  # names what supersedes it
    assert problem(seen["forgotten"])["type"] == problem_type("memory-forgotten")
    assert ok(seen["restored"])["version_id"]
    assert [e["type"] for e in seen["history"]["events"]][-2:] == [
        "EdgeRetracted",
        "VersionRecorded",
    ]


def test_list_pages_newest_first_by_type_and_scope(runtime: Runtime, tenant: Tenant) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        made = []
        for i in range(3):
            claim = {"content": f"Decision {i}.", "type": "decision", "scope": "team"}
            made.append(ok(await client.call_tool("remember", claim))["memory_id"])
        ok(
            await client.call_tool(
                "remember", {"content": "A note.", "type": "note", "scope": "team"}
            )
        )
        first = ok(
            await client.call_tool("list", {"type": "decision", "scope": "team", "limit": 2})
        )
        second = ok(
            await client.call_tool(
                "list",
                {"type": "decision", "scope": "team", "limit": 2, "cursor": first["next_cursor"]},
            )
        )
        return {"made": made, "first": first, "second": second}

    seen = _with_client(runtime, tenant.token("writer"), scenario)
    pages = [i["id"] for i in seen["first"]["items"]] + [i["id"] for i in seen["second"]["items"]]
    assert pages == list(reversed(seen["made"]))
    assert seen["second"]["next_cursor"] is None
    assert {i["type"] for i in seen["first"]["items"]} == {"decision"}


def test_descriptions_are_plain_text_for_a_model(runtime: Runtime, tenant: Tenant) -> None:
    async def scenario(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {t.name: t for t in _with_client(runtime, tenant.token("writer"), scenario)}
    for tool in tools.values():
        description = tool.description or ""
        assert description and not any(line.startswith(" ") for line in description.splitlines())
        assert "log position" not in json.dumps(tool.model_dump(mode="json")), tool.name
    # When to use which, and what to do with a potential conflict.
    assert "revise" in (tools["remember"].description or "")
    assert "settle" in (tools["remember"].description or "")
    assert "recall" in (tools["revise"].description or "")
    # The writes take a request_id; remember's type and scope are required, as over HTTP.
    for name in ("remember", "revise", "settle", "forget"):
        assert "request_id" in tools[name].input_schema["properties"], name
    assert {"content", "type", "scope"} <= set(tools["remember"].input_schema["required"])
