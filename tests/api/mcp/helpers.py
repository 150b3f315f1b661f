"""Shared by the MCP tests: a backend over the test runtime, and reading tool results."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from mcp.types import CallToolResult

from palimpsest.api._settings import ApiSettings
from palimpsest.api.mcp._backend import Backend
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.runtime import Runtime

TOOLS = {"remember", "recall", "revise", "settle", "list", "forget", "history"}
ADMIN_TOOLS = {
    "pin",
    "unpin",
    "restore",
    "erase",
    "set_retention",
    "list_proposals",
    "decide_proposal",
}


def backend_for(runtime: Runtime, token: str | None) -> Backend:
    """A backend acting as ``token`` (stdio's way), with no drain to wake."""
    settings = ApiSettings()
    writer = Writer(
        runtime.log,
        CapturePolicy(
            raw_retention=timedelta(hours=settings.raw_retention_hours),
            transient_retention=timedelta(hours=settings.transient_retention_hours),
        ),
        clock=lambda: datetime.now(UTC),
    )
    return Backend(
        runtime=runtime,
        writer=writer,
        wake=lambda: None,
        clock=lambda: datetime.now(UTC),
        token=token,
    )


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured answer of a call that succeeded."""
    assert not result.is_error, result.content
    found = result.structured_content
    assert isinstance(found, dict)
    return found


def problem(result: CallToolResult) -> dict[str, Any]:
    """The problem document of a call refused as a tool error."""
    assert result.is_error
    text = result.content[0]
    assert text.type == "text"
    found: dict[str, Any] = json.loads(text.text)
    return found


def problem_type(slug: str) -> str:
    return f"urn:palimpsest:problem:{slug}"
