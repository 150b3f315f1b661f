"""A store written by the code before the package rename replays, verifies and serves.

Commit 6363067 moved every module under ``palimpsest.`` (``domain.memory`` became
``palimpsest.domain.memory``). Stored events and snapshots name their classes by
explicit topics (``palimpsest:MemoryCreated``, ``palimpsest:Memory``), never by
module path, so a store written before it must need nothing. The store here was
written over HTTP by the code of commit 30cf9f2 and dumped with ``pg_dump``
(``tests/fixtures/store_before_rename/make_store.py`` says how to write it again);
``expected.json`` holds its tokens and ids and what that code answered. The module
restores it once into a database of its own, never the run's (the log one write per
transaction, as it was written: see :func:`_restore`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pgserver
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli._exit_code import EXIT_OK
from palimpsest.projections.runtime import start_runtime
from palimpsest.projections.store.database import Database, open_database
from palimpsest.projections.store.settings import DatabaseSettings
from tests.conftest import drain_until_caught_up, fresh_database
from tests.fixtures.store_before_rename.make_store import COMMIT, event_digests

FIXTURE = Path(__file__).parent / "fixtures" / "store_before_rename"
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text())
NOT_FOUND = "urn:palimpsest:problem:not-found"
_LOG_DATA = "TABLE DATA palimpsest palimpsest_events "
"""The dump's entry for the log's rows (``pg_restore --list``)."""
_APP_ROLE = "palimpsest_app"
"""The runtime role the dump's grants name: the old code's default."""


@dataclass(frozen=True)
class Restored:
    """The old store, restored into a database of its own."""

    url: str
    settings: DatabaseSettings


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restored]:
    """Restore ``store.dump`` with pgserver's ``pg_restore`` (16, as the dump) into a
    fresh database: an embedded cluster of its own, or a new database on the
    ``DATABASE_URL`` server; stop the embedded cluster afterwards."""
    with fresh_database(tmp_path_factory) as database:
        if database.settings.db_app_role != _APP_ROLE:
            pytest.skip(f"the dump grants to {_APP_ROLE}, not PALIMPSEST_DB_APP_ROLE")
        opened = open_database(database.settings)
        url = _owner_url(database.settings, opened)
        _ensure_app_role(opened)
        _restore(url, tmp_path_factory.mktemp("restore") / "toc.list")
        try:
            yield Restored(url, DatabaseSettings(database_url=url))
        finally:
            if opened.embedded is not None:
                opened.embedded.handle.cleanup()


def _pg(program: str, *args: str) -> str:
    """Run one of pgserver's PostgreSQL 16 client programs; return its output."""
    path = Path(pgserver.__file__).parent / "pginstall" / "bin" / program
    done = subprocess.run(
        [str(path), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _restore(url: str, toc: Path) -> None:
    """Restore ``store.dump`` into ``url``, the log one write per transaction.

    Replay, verify, as-of reads and ``visible_at`` find where a write ends by its
    events' shared ``xmin`` (docs/history.md), which a dump does not carry: a plain
    ``pg_restore`` copies the whole log in one transaction, and verify then reads it
    as one write (every position moved to the log's head). So everything but the
    log's rows is restored as it is, then the rows are copied again write by write,
    as ``write_ends`` (recorded from the old store's ``xmin``) delimits them.
    """
    dump = str(FIXTURE / "store.dump")
    entries = _pg("pg_restore", "--list", dump).splitlines()
    toc.write_text("\n".join(e for e in entries if _LOG_DATA not in e) + "\n")
    _pg(
        "pg_restore",
        *("--no-owner", "--exit-on-error", "--single-transaction"),
        *("--use-list", str(toc), "--dbname", url, dump),
    )
    copied = _pg("pg_restore", "--data-only", "--table", "palimpsest_events", "--file", "-", dump)
    lines = copied.splitlines(keepends=True)
    [start] = [i for i, line in enumerate(lines) if line.startswith("COPY ")]
    end = lines.index("\\.\n", start)
    copy, rows = lines[start].strip().rstrip(";"), lines[start + 1 : end]
    columns = copy[copy.index("(") + 1 : copy.index(")")].split(", ")
    position = columns.index("notification_id")
    rows.sort(key=lambda row: int(row.split("\t")[position]))
    with psycopg.connect(url, autocommit=True) as conn:
        for write_end in EXPECTED["counts"]["write_ends"]:
            write = []
            while rows and int(rows[0].split("\t")[position]) <= write_end:
                write.append(rows.pop(0))
            with conn.transaction(), conn.cursor().copy(copy) as into:
                into.write("".join(write))
    assert not rows, "events past the last write"


def _owner_url(settings: DatabaseSettings, database: Database) -> str:
    """The owner's URL of the restored database, for this process and the CLI's."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return (
        f"postgresql://{database.owner_user}:{database.owner_password}@/{database.dbname}"
        f"?host={database.host}&port={database.port}"
    )


def _ensure_app_role(database: Database) -> None:
    """Create the runtime role if the server has none: roles are the server's, not the
    dump's (migration 0001 creates it the same way)."""
    with database.owner_connection(autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (_APP_ROLE,)).fetchone():
            return
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS").format(
                sql.Identifier(_APP_ROLE)
            )
        )


def _palimpsest(restored: Restored, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m palimpsest args`` of this code on the restored database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALIMPSEST_")}
    env["DATABASE_URL"] = restored.url
    return subprocess.run(
        [sys.executable, "-m", "palimpsest", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _get(client: TestClient, path: str, token: str) -> dict[str, Any]:
    response = client.get(path, headers=_headers(token))
    assert response.status_code == 200, (path, response.text)
    answer: dict[str, Any] = response.json()
    return answer


def _without(answer: dict[str, Any], *names: str) -> dict[str, Any]:
    """``answer`` without what depends on when it is read: the salience score decays with
    time, and the revision is the drains' watermark, which ``rebuild`` sets again."""
    return {k: v for k, v in answer.items() if k not in names}


def _listed(page: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(item["id"], item["status"], item.get("belief")) for item in page["items"]]


@pytest.mark.slow
def test_the_store_is_the_one_the_old_code_wrote(restored: Restored) -> None:
    # The fixture is what it says: written by 30cf9f2, restored with its writes, with a
    # snapshot, and nothing in its log or its snapshots names a module of either layout.
    assert EXPECTED["written_by"] == COMMIT
    database = open_database(restored.settings)
    schema = sql.Identifier(database.schema)
    with database.owner_connection() as conn:
        log = conn.execute(
            sql.SQL(
                "SELECT notification_id, xmin::text, topic FROM {}.palimpsest_events"
                " ORDER BY notification_id"
            ).format(schema)
        ).fetchall()
        snapshots = conn.execute(
            sql.SQL("SELECT topic, state FROM {}.palimpsest_snapshots").format(schema)
        ).fetchall()
        revision = conn.execute(
            sql.SQL("SELECT version_num FROM {}.alembic_version").format(schema)
        ).fetchone()
    counts = EXPECTED["counts"]
    assert revision is not None and revision[0] == counts["schema_revision"]
    assert len(log) == counts["events"]
    assert all(topic.startswith("palimpsest:") for _, _, topic in log)
    ends = [p for (p, x, _), (_, after, _) in pairwise(log) if x != after]
    assert [*ends, log[-1][0]] == counts["write_ends"]
    assert len(snapshots) == counts["snapshots"] > 0
    for topic, state in snapshots:
        assert topic == "eventsourcing.domain:Snapshot"
        assert json.loads(bytes(state))["topic"] == "palimpsest:Memory"


@pytest.mark.slow
def test_the_command_line_migrates_verifies_and_rebuilds_the_old_store(
    restored: Restored,
) -> None:
    # The schema needs no migration: 30cf9f2 and this code have the same revisions.
    migrated = _palimpsest(restored, "migrate")
    assert migrated.returncode == EXIT_OK, migrated.stderr
    assert "schema is current" in migrated.stderr
    # The new code replays every event and snapshot and finds the read models true, and
    # recomputes them all. Two workers: each a fresh interpreter, where only the topics
    # the new code defines can resolve what the old code stored.
    verified = _palimpsest(restored, "verify", "--workers", "2")
    assert verified.returncode == EXIT_OK, (verified.stdout, verified.stderr[-3000:])
    assert verified.stdout == "", verified.stdout  # a divergence is a line here
    rebuilt = _palimpsest(restored, "rebuild", "--workers", "2")
    assert rebuilt.returncode == EXIT_OK, (rebuilt.stdout, rebuilt.stderr[-3000:])


@pytest.mark.slow
def test_the_old_store_serves_what_the_old_code_served_and_takes_new_writes(
    restored: Restored,
) -> None:
    runtime = start_runtime(restored.settings)
    try:
        with TestClient(create_app(ApiSettings(), runtime)) as client:
            _reads_as_before(client)
            _tenants_stay_apart(client)
            _idempotent_write_replays(client)
            _new_versions_read_current(client, lambda: drain_until_caught_up(runtime))
    finally:
        runtime.close()
    # What was written on top verifies too (one worker: this time in-process).
    done = _palimpsest(restored, "verify", "--workers", "1")
    assert done.returncode == EXIT_OK, (done.stdout, done.stderr[-3000:])
    assert done.stdout == "", done.stdout


def _token_of(name: str) -> str:
    tenants = EXPECTED["tenants"]
    if EXPECTED["tenant_of"][name] == "second":
        return str(tenants["second"]["admin_token"])
    return str(tenants["default"]["reader_token"])


def _reads_as_before(client: TestClient) -> None:
    """Every memory, listing, feed, decision, receipt and cycle reads as the old code
    answered it (what depends on the time of the read aside)."""
    answers = EXPECTED["answers"]
    reader = EXPECTED["tenants"]["default"]["reader_token"]
    for name, memory_id in EXPECTED["memories"].items():
        token = _token_of(name)
        old = answers["memories"][name]
        read = _get(client, f"/v1/memories/{memory_id}", token)
        assert _without(read, "salience", "revision") == _without(
            old["read"], "salience", "revision"
        ), name
        assert _get(client, f"/v1/memories/{memory_id}/versions", token) == old["versions"], name
        history = _get(client, f"/v1/memories/{memory_id}/history", token)
        history["events"] = event_digests(history["events"])
        assert history == old["history"], name
    erased = EXPECTED["memories"][EXPECTED["erased"]["memory"]]
    read = _get(client, f"/v1/memories/{erased}", reader)
    assert read["status"] == "erased"
    assert read["erasure"]["id"] == EXPECTED["erased"]["erasure_id"]
    tokens = {"default": reader, "second": EXPECTED["tenants"]["second"]["admin_token"]}
    for tenant, token in tokens.items():
        feed = _get(client, "/v1/events?after=0&limit=1000", token)
        assert event_digests(feed["events"]) == answers["events"][tenant], tenant
        listing = _get(client, "/v1/memories?limit=100", token)
        assert _listed(listing) == _listed(answers["listing"][tenant]), tenant
    archived = _get(client, "/v1/memories?limit=100&include_archived=true", reader)
    assert _listed(archived) == _listed(answers["listing_archived"])
    counter = EXPECTED["memories"][EXPECTED["snapshotted"]]
    position = answers["as_of_snapshotted"]["position"]
    as_of = _get(client, f"/v1/memories/{counter}?at_position={position}", reader)
    assert as_of == answers["as_of_snapshotted"]
    for name, decision_id in EXPECTED["decisions"].items():
        assert _get(client, f"/v1/decisions/{decision_id}", reader) == answers["decisions"][name]
    admin = EXPECTED["tenants"]["default"]["admin_token"]
    receipt = _get(client, f"/v1/erasures/{EXPECTED['erased']['erasure_id']}", admin)
    assert receipt == answers["erasure"]
    # A cycle's report has gained what a person reads (texts beside ids, the factors and
    # buckets explained: issue 46); everything it answered before is answered the same.
    cycle = _get(client, f"/v1/cycles/{EXPECTED['cycle_id']}", reader)
    assert {key: cycle.get(key) for key in answers["cycle"]} == answers["cycle"]
    recalled = client.post(
        "/v1/recall",
        json={"query": "PostgreSQL", "mode": "text", "k": 10},
        headers=_headers(reader),
    )
    assert recalled.status_code == 200, recalled.text
    assert {i["id"] for i in recalled.json()["items"]} == {
        i["id"] for i in answers["recall_text"]["items"]
    }


def _tenants_stay_apart(client: TestClient) -> None:
    """Each tenant's token finds none of the other tenant's memories."""
    tenants = EXPECTED["tenants"]
    theirs = EXPECTED["memories"]["second"]
    ours = EXPECTED["memories"]["dark_mode"]
    for memory_id, token in (
        (theirs, tenants["default"]["reader_token"]),
        (theirs, tenants["default"]["admin_token"]),
        (ours, tenants["second"]["admin_token"]),
    ):
        response = client.get(f"/v1/memories/{memory_id}", headers=_headers(token))
        assert response.status_code == 404
        assert response.json()["type"] == NOT_FOUND


def _idempotent_write_replays(client: TestClient) -> None:
    """A write the old code recorded under an ``Idempotency-Key`` replays, writing nothing."""
    idempotent = EXPECTED["idempotent"]
    reader = EXPECTED["tenants"]["default"]["reader_token"]
    head = _get(client, "/v1/events?after=0&limit=1000", reader)["events"][-1]["position"]
    response = client.post(
        "/v1/memories",
        json=idempotent["body"],
        headers={
            **_headers(EXPECTED["tenants"]["default"]["writer_token"]),
            "Idempotency-Key": idempotent["key"],
        },
    )
    assert response.status_code == 201, response.text
    assert response.headers["Idempotent-Replayed"] == "true"
    assert response.json()["id"] == EXPECTED["memories"][idempotent["memory"]]
    assert _get(client, f"/v1/events?after={head}", reader)["events"] == []


def _new_versions_read_current(client: TestClient, drain: Callable[[], object]) -> None:
    """A new version of an old memory, and of the one loaded from its snapshot, reads
    back current once the drains publish it, after every version the old code wrote."""
    writer = EXPECTED["tenants"]["default"]["writer_token"]
    reader = EXPECTED["tenants"]["default"]["reader_token"]
    written = {}
    for name in ("database", EXPECTED["snapshotted"]):
        memory_id = EXPECTED["memories"][name]
        content = f"{name}: written on top of the old store"
        response = client.post(
            f"/v1/memories/{memory_id}/versions",
            json={"content": content},
            headers=_headers(writer),
        )
        assert response.status_code == 201, response.text
        written[name] = (memory_id, content, response.json())
    drain()
    for name, (memory_id, content, answer) in written.items():
        read = _get(client, f"/v1/memories/{memory_id}", reader)
        assert read["status"] == "current", read
        assert read["content"] == content
        assert read["belief"]["current_version_id"] == answer["version_id"]
        old = EXPECTED["answers"]["memories"][name]["versions"]["versions"]
        versions = _get(client, f"/v1/memories/{memory_id}/versions", reader)["versions"]
        assert versions[:-1] == old
        assert [v["number"] for v in versions] == list(range(1, len(old) + 2))
        assert versions[-1]["content"] == content
        assert versions[-1]["position"] == answer["position"] > old[-1]["position"]
