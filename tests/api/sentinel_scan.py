"""Looking for a sentinel everywhere palimpsest keeps or serves text: the one scan every
erasure test uses.

A place is named by a short string (``column <schema>.<table>.<column>``, ``statistics
…``, ``file base/…``, ``export``, ``replay``, ``review``, ``mcp history <id>``, ``GET
<path>``…), so a failing test says where the sentinel was left. Matching ignores case
(recall's words are lowercased lexemes) and also looks for the sentinel's bytes written
as hex (``bytea`` shown as text). The database places are found from the catalog, never
from a list kept by hand, so a new table or column is searched the day it is added.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from psycopg import sql

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli import main
from tests.api.live_server import live_server
from tests.api.test_review_page import _sign_in

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from fastapi.testclient import TestClient

    from palimpsest.projections.runtime import Runtime
    from tests.conftest import Tenant

__all__ = [
    "Reach",
    "database_places",
    "file_places",
    "replays",
    "sentinel_places",
    "service_places",
    "statistics_places",
]

_TEXT_TYPES = ("text", "varchar", "bpchar", "name", "json", "jsonb", "bytea", "tsvector", "xml")
"""Column types (or array element types) that can hold text: what the scan reads."""

_COLUMNS = (
    "SELECT n.nspname, c.relname, a.attname, coalesce(e.typname, t.typname)"
    " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
    " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid"
    " LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'"
    " WHERE c.relkind IN ('r', 'p', 'm') AND a.attnum > 0 AND NOT a.attisdropped"
    " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
    " AND n.nspname NOT LIKE 'pg_toast%%' AND n.nspname NOT LIKE 'pg_temp%%'"
    " AND coalesce(e.typname, t.typname) = ANY(%s)"
    " ORDER BY n.nspname, c.relname, a.attnum"
)


def _needles(sentinel: str) -> list[str]:
    """The lowercase forms the sentinel may be found in: as text, and its bytes (and
    its lowercase bytes) as hex."""
    return [
        sentinel.lower(),
        sentinel.encode().hex(),
        sentinel.lower().encode().hex(),
    ]


def _held(value: str, sentinel: str) -> bool:
    lowered = value.lower()
    return any(needle in lowered for needle in _needles(sentinel))


def database_places(runtime: Runtime, sentinel: str) -> set[str]:
    """Return every column, of every table of every schema, holding the sentinel in
    some row (all tenants: as the owner), with ``bytea`` decoded."""
    found: set[str] = set()
    tables: dict[tuple[str, str], list[tuple[str, str]]] = {}
    with runtime.database.owner_connection(autocommit=True) as conn:
        for schema, table, column, kind in conn.execute(_COLUMNS, (list(_TEXT_TYPES),)):
            tables.setdefault((schema, table), []).append((column, kind))
        assert {"payloads", "lexeme_counts", "memory_texts", "palimpsest_events"} <= {
            t for _, t in tables
        }, "the catalog query finds the store's tables"
        for (schema, table), columns in tables.items():
            tests = []
            for column, kind in columns:
                # bytea decoded (escape keeps ASCII as it is); anything else as its text.
                value = (
                    sql.SQL("lower(encode({c}, 'escape'))")
                    if kind == "bytea"
                    else sql.SQL("lower({c}::text)")
                ).format(c=sql.Identifier(column))
                held = sql.SQL(" OR ").join(
                    sql.SQL("strpos({v}, {n}) > 0").format(v=value, n=sql.Literal(needle))
                    for needle in _needles(sentinel)
                )
                tests.append(sql.SQL("count(*) FILTER (WHERE {h})").format(h=held))
            row = conn.execute(
                sql.SQL("SELECT {tests} FROM {s}.{t}").format(
                    tests=sql.SQL(", ").join(tests),
                    s=sql.Identifier(schema),
                    t=sql.Identifier(table),
                )
            ).fetchone()
            assert row is not None
            found |= {
                f"column {schema}.{table}.{column}"
                for (column, _), count in zip(columns, row, strict=True)
                if count
            }
    return found


def statistics_places(runtime: Runtime, sentinel: str) -> set[str]:
    """``ANALYZE`` the database, then return the columns whose statistics (most common
    values, histogram bounds, most common elements) hold the sentinel."""
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute("ANALYZE")
        rows = conn.execute(
            "SELECT schemaname, tablename, attname, concat_ws(' ', most_common_vals::text,"
            " histogram_bounds::text, most_common_elems::text) FROM pg_stats"
            " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    return {
        f"statistics {schema}.{table}.{column}"
        for schema, table, column, values in rows
        if values and _held(str(values), sentinel)
    }


def file_places(runtime: Runtime, sentinel: str) -> set[str] | None:
    """``VACUUM FULL`` the whole database (catalogs included), checkpoint, and return
    the files of the database's directory holding the sentinel's bytes; None when the
    owner may not read the server's files (not a superuser)."""
    wanted = {sentinel.encode(), sentinel.lower().encode()}
    found: set[str] = set()
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        if not row or not row[0]:
            return None
        conn.execute("VACUUM FULL")
        conn.execute("CHECKPOINT")
        folder = conn.execute(
            "SELECT 'base/' || oid FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        assert folder is not None
        names = [n for (n,) in conn.execute("SELECT pg_ls_dir(%s)", (folder[0],))]
        assert len(names) > 100, "the database's directory holds its relations"
        for name in names:
            path = f"{folder[0]}/{name}"
            # missing_ok: a file VACUUM FULL left behind may go at any checkpoint.
            data = conn.execute("SELECT pg_read_binary_file(%s, true)", (path,)).fetchone()
            if data is not None and data[0] is not None:
                held = bytes(data[0])
                if any(w in held for w in wanted):
                    found.add(f"file {path}")
    return found


@dataclass
class Reach:
    """What a scan of the service reads: a tenant's ids, and how to run the CLI."""

    client: TestClient
    runtime: Runtime
    tenant: Tenant
    memory_ids: list[str] = field(default_factory=list)
    observation_ids: list[str] = field(default_factory=list)
    proposal_ids: list[str] = field(default_factory=list)
    cycle_ids: list[str] = field(default_factory=list)
    positions: list[int] = field(default_factory=list)
    """Log positions to read the memories at (as-of) and to replay at."""
    capsys: pytest.CaptureFixture[str] | None = None
    """For ``palimpsest replay`` (whose environment names this runtime's database);
    None: no replay."""
    replay_out: Path | None = None
    """Where ``palimpsest replay --out`` writes, if it runs."""


def _get(reach: Reach, path: str, **params: Any) -> str:
    response = reach.client.get(path, params=params, headers=reach.tenant.headers())
    assert response.status_code < 500, (path, response.text)
    return response.text


def _reads(reach: Reach, sentinel: str) -> dict[str, str]:
    """Every read of the tenant's content the HTTP API serves, by name (recall asked
    for the sentinel itself: only what it returns counts, not the query it echoes)."""
    texts: dict[str, str] = {}

    def read(path: str, **params: Any) -> None:
        shown = "&".join(f"{k}={v}" for k, v in params.items())
        texts[f"GET {path}{'?' + shown if shown else ''}"] = _get(reach, path, **params)

    for memory_id in reach.memory_ids:
        for tail in ("", "/history", "/versions"):
            read(f"/v1/memories/{memory_id}{tail}")
        for position in reach.positions:
            read(f"/v1/memories/{memory_id}", at_position=position)
            read(f"/v1/memories/{memory_id}/history", at_position=position)
    for observation_id in reach.observation_ids:
        read(f"/v1/observations/{observation_id}")
        read(f"/v1/observations/{observation_id}/content")
    read("/v1/memories", include_archived="true", include_reflections="true", limit=100)
    for position in reach.positions:
        read("/v1/memories", include_archived="true", at_position=position, limit=100)
    for status in ("proposed", "applied", "rejected", "dismissed"):
        read("/v1/proposals", status=status, limit=100)
    for proposal_id in reach.proposal_ids:
        read(f"/v1/proposals/{proposal_id}")
    for cycle_id in reach.cycle_ids:
        read(f"/v1/cycles/{cycle_id}")
    read("/v1/forgetting/items")
    for mode in ("text", "hybrid"):
        recalled = reach.client.post(
            "/v1/recall",
            json={"query": sentinel, "mode": mode, "k": 50, "include_reflections": True},
            headers=reach.tenant.headers(),
        )
        assert recalled.status_code == 200, recalled.text
        answer = recalled.json()
        texts[f"POST /v1/recall ({mode})"] = json.dumps([answer["items"], answer["reflections"]])
    return texts


def _mcp_histories(reach: Reach) -> dict[str, str]:
    """The MCP ``history`` tool's answer for each memory, over the app's ``/mcp``."""

    async def scenario(url: str) -> dict[str, str]:
        answers: dict[str, str] = {}
        headers = {"Authorization": f"Bearer {reach.tenant.admin.token}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            for memory_id in reach.memory_ids:
                result = await client.call_tool("history", {"memory_id": memory_id})
                assert not result.is_error, result.content
                answers[f"mcp history {memory_id}"] = json.dumps(result.structured_content)
        return answers

    with live_server(create_app(ApiSettings(), reach.runtime)) as base:
        return asyncio.run(scenario(base + "/mcp"))


def _review_page(reach: Reach) -> str:
    """The review page's list of open proposals, as a signed-in admin sees it."""
    from fastapi.testclient import TestClient

    with TestClient(reach.client.app, follow_redirects=False) as page:
        _sign_in(page, reach.tenant.admin.token)
        listing = page.get("/review")
        assert listing.status_code == 200, listing.text
        return listing.text


def replays(reach: Reach) -> dict[str, str]:
    """Return what ``palimpsest replay`` prints at each position and at the log's head
    (and writes with ``--out``), by name. Replay prints beliefs (ids, labels, grades),
    never content: the scan shows it holds no erased text, and a test shows it names
    the erasure in place of an erased memory's belief."""
    capsys = reach.capsys
    assert capsys is not None
    texts: dict[str, str] = {}
    head = max(reach.positions, default=0)
    with reach.runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT max(notification_id) FROM "{reach.runtime.database.schema}".palimpsest_events'
        ).fetchone()
        head = max(head, int(row[0]) if row and row[0] else 0)
    for position in {*reach.positions, head}:
        capsys.readouterr()
        tenant = str(reach.tenant.id)
        assert main(["replay", "--at-position", str(position), "--tenant", tenant]) == 0
        texts[f"replay at {position}"] = capsys.readouterr().out
        if reach.replay_out is not None:
            out = str(reach.replay_out)
            assert main(["replay", "--at-position", str(position), "--out", out]) == 0
            capsys.readouterr()
            texts[f"replay --out at {position}"] = reach.replay_out.read_text()
    return texts


def service_places(reach: Reach, sentinel: str) -> set[str]:
    """Return every read of the service that shows the sentinel: the HTTP reads of the
    tenant's memories, observations, proposals, cycles, listings and recall; the
    tenant export; the review page; the MCP ``history`` tool; and ``palimpsest
    replay`` when the reach can run it."""
    texts = _reads(reach, sentinel)
    texts["export"] = _get(reach, "/v1/tenant/export")
    texts["review"] = _review_page(reach)
    texts.update(_mcp_histories(reach))
    if reach.capsys is not None:
        texts.update(replays(reach))
    return {place for place, text in texts.items() if _held(text, sentinel)}


def sentinel_places(reach: Reach, sentinel: str) -> set[str]:
    """Return every place the sentinel is found: the service's reads
    (:func:`service_places`), every column of the database (:func:`database_places`),
    the statistics after ``ANALYZE`` (:func:`statistics_places`) and the database's
    files after ``VACUUM FULL`` (:func:`file_places`, when the owner may read them)."""
    found = service_places(reach, sentinel) | database_places(reach.runtime, sentinel)
    found |= statistics_places(reach.runtime, sentinel)
    return found | (file_places(reach.runtime, sentinel) or set())
