"""Erasure: content and its lineage go, from every table, read, export and replay.

The sentinel tests write a unique string, erase it, run every drain, and then
look for it everywhere a user could find it: every column of every table in
the database (as text, and as hex for bytes), the payload table's file on
disk after ``VACUUM FULL``, the tenant export, replay output and every read.
Each search is first shown to find the sentinel before the erasure, so none
of them can pass by looking in the wrong place.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from palimpsest.api.cli import main
from palimpsest.projections.drains.expiry import expire_due
from palimpsest.projections.drains.retention import apply_retention
from palimpsest.projections.drains.tenant_erasure import erase_deleted_tenants
from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.conftest import (
    RunDatabase,
    Tenant,
    count_events,
    drain_until_caught_up,
    index_until_caught_up,
)


def _sentinel() -> str:
    return f"SENTINEL{uuid.uuid4().hex}"


def database_hits(runtime: Runtime, sentinel: str) -> dict[str, int]:
    """Return, per table of every schema, the rows whose text (or bytes, as hex)
    contain ``sentinel``: every column of every table, as the owner (all tenants)."""
    hexed = sentinel.encode().hex()
    hits: dict[str, int] = {}
    with runtime.database.owner_connection(autocommit=True) as conn:
        tables = conn.execute(
            "SELECT n.nspname, c.relname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind IN ('r', 'p', 'm')"
            " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
            " AND n.nspname NOT LIKE 'pg_toast%%'"
        ).fetchall()
        assert len(tables) > 15
        for schema, table in tables:
            row = conn.execute(
                f'SELECT count(*) FROM "{schema}"."{table}" t'
                " WHERE t::text LIKE %s OR t::text LIKE %s",
                (f"%{sentinel}%", f"%{hexed}%"),
            ).fetchone()
            if row and row[0]:
                hits[f"{schema}.{table}"] = int(row[0])
    return hits


def payload_file_holds(runtime: Runtime, sentinel: str) -> bool | None:
    """Return whether the payload table's files on disk (heap and TOAST) hold the
    sentinel's bytes, after a checkpoint; None if the owner may not read files."""
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        if not row or not row[0]:
            return None
        conn.execute("CHECKPOINT")
        relations = conn.execute(
            "SELECT c.oid::regclass::text, t.oid::regclass::text FROM pg_class c"
            " LEFT JOIN pg_class t ON t.oid = c.reltoastrelid"
            " WHERE c.oid = %s::regclass",
            (f'"{schema}".payloads',),
        ).fetchone()
        assert relations is not None
        found = False
        for relation in relations:
            if relation is None:
                continue
            data = conn.execute(
                "SELECT pg_read_binary_file(pg_relation_filepath(%s::regclass))", (relation,)
            ).fetchone()
            assert data is not None
            found = found or sentinel.encode() in bytes(data[0])
        return found


def embedding_rows(runtime: Runtime, memory_id: str) -> int:
    """Return how many recall index rows the memory has (any model)."""
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".memory_embeddings'
            " WHERE memory_id = %s",
            (memory_id,),
        ).fetchone()
    return int(row[0]) if row else 0


def export_text(client: TestClient, headers: dict[str, str]) -> str:
    response = client.get("/v1/tenant/export", headers=headers)
    assert response.status_code == 200, response.text
    return response.text


def run_every_drain(runtime: Runtime) -> None:
    """Every drain the service runs, until each finds nothing to do."""
    now = datetime.now(UTC)
    while apply_retention(runtime.log, now=now) or expire_due(runtime.log, now=now):
        pass
    while erase_deleted_tenants(runtime.log):
        pass
    drain_until_caught_up(runtime)


def replay_output(
    capsys: pytest.CaptureFixture[str], tenant: Tenant, position: int, out: Path
) -> str:
    capsys.readouterr()
    code = main(["replay", "--at-position", str(position), "--tenant", str(tenant.id)])
    assert code == 0
    printed = capsys.readouterr().out
    assert main(["replay", "--at-position", str(position), "--out", str(out)]) == 0
    capsys.readouterr()
    return printed + out.read_text()


@pytest.fixture
def cli_env(test_database: RunDatabase, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)


def erase(client: TestClient, headers: dict[str, str], **body: Any) -> Any:
    return post(client, "/v1/erasures", {"reason": "the user asked", **body}, headers)


def assert_reads_name_the_erasure(
    client: TestClient,
    headers: dict[str, str],
    obs: str,
    memory_id: str,
    position: int,
    erasure_id: str,
) -> None:
    """Every read of the erased observation and memory answers with a placeholder
    naming the erasure: content, metadata, current, as-of, history, versions, lists."""
    content = client.get(f"/v1/observations/{obs}/content", headers=headers)
    assert content.status_code == 410 and problem_slug(content) == "content-erased"
    assert content.json()["erasure"]["id"] == erasure_id
    assert client.get(f"/v1/observations/{obs}", headers=headers).json()["erased"]["id"] == (
        erasure_id
    )
    current = client.get(f"/v1/memories/{memory_id}", headers=headers).json()
    assert current["status"] == "erased" and current["erasure"]["id"] == erasure_id
    as_of = client.get(
        f"/v1/memories/{memory_id}", headers=headers, params={"at_position": position}
    ).json()
    assert as_of["status"] == "erased" and as_of["erasure"]["id"] == erasure_id
    for path in ("history", "versions"):
        record = client.get(f"/v1/memories/{memory_id}/{path}", headers=headers).json()
        assert record["erased"]["id"] == erasure_id
        assert [v["content"] for v in record["versions"]] == [None]
        assert record["versions"][0]["erased"]["id"] == erasure_id
    assert client.get("/v1/memories", headers=headers).json()["items"] == []
    listed = client.get("/v1/memories?include_archived=true", headers=headers).json()["items"]
    assert [(i["id"], i["status"]) for i in listed] == [(memory_id, "erased")]
    old_list = client.get("/v1/memories", headers=headers, params={"at_position": position}).json()
    assert old_list["items"] == []


def test_erasure_leaves_nothing_behind(
    client: TestClient,
    tenant: Tenant,
    runtime: Runtime,
    cli_env: None,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    data_dir_of: Path | None,
) -> None:
    # The embedded server's owner is a superuser and may read the table's file;
    # another server's owner may not, and then that one check is left out.
    on_disk = (True, False) if data_dir_of is not None else (None, None)
    headers = tenant.headers()
    sentinel = _sentinel()
    said = f"My passport number is {sentinel}, please remember it."
    obs = observe(client, headers, said)
    start = said.index(sentinel)
    memory = remember(
        client,
        headers,
        type="fact",
        content=f"Passport number {sentinel}",
        evidence=[{"observation_id": obs, "start": start, "end": start + len(sentinel)}],
    )
    unrelated = observe(client, headers, "The weather was fine.")
    index_until_caught_up(runtime, tenant.id)
    position = memory["position"]
    assert embedding_rows(runtime, memory["id"]) == 1
    # Every place searched below holds the sentinel now.
    assert database_hits(runtime, sentinel).keys() == {f"{runtime.database.schema}.payloads"}
    assert payload_file_holds(runtime, sentinel) is on_disk[0]
    assert sentinel in export_text(client, headers)
    history = client.get(f"/v1/memories/{memory['id']}/history", headers=headers).json()
    assert sentinel in history["versions"][0]["content"]

    response = erase(client, headers, observation_ids=[obs])
    assert response.status_code == 201, response.text
    receipt = response.json()
    assert receipt["status"] == "completed" and receipt["kind"] == "erasure"
    assert receipt["removed"] == {
        "observations": 1,
        "memories": 1,
        "versions": 1,
        "excerpts": 1,
        "contributions_deactivated": 0,
    }
    observed = client.get(f"/v1/observations/{obs}", headers=headers).json()
    assert observed["digest"] in receipt["digests"]
    assert history["versions"][0]["content_digest"] in receipt["digests"]
    assert history["versions"][0]["formed_from"][0]["excerpt_digest"] in receipt["digests"]
    assert client.get(f"/v1/erasures/{receipt['id']}", headers=headers).json() == receipt

    run_every_drain(runtime)
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(f'VACUUM FULL "{runtime.database.schema}".payloads')

    assert database_hits(runtime, sentinel) == {}
    assert payload_file_holds(runtime, sentinel) is on_disk[1]
    assert embedding_rows(runtime, memory["id"]) == 0  # recall cannot find it either
    exported = export_text(client, headers)
    assert sentinel not in exported
    lines = [json.loads(x) for x in exported.splitlines()]
    assert lines[-1]["erasure_receipts"] == 1, lines[-3:]
    receipts = [x for x in lines if x["kind"] == "erasure_receipt"]
    assert [r["receipt"] for r in receipts] == [receipt]
    replayed = replay_output(capsys, tenant, position, tmp_path / "replay.jsonl")
    assert sentinel not in replayed and receipt["id"] in replayed
    assert_reads_name_the_erasure(client, headers, obs, memory["id"], position, receipt["id"])
    # What was not named stays.
    kept = client.get(f"/v1/observations/{unrelated}/content", headers=headers)
    assert kept.status_code == 200 and kept.text == "The weather was fine."
    # A rebuild from the log brings none of it back.
    rebuild(runtime.database)
    assert database_hits(runtime, sentinel) == {}
    assert client.get(f"/v1/memories/{memory['id']}", headers=headers).json()["status"] == (
        "erased"
    )


def test_a_memory_with_a_second_source_is_recomputed_not_deleted(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    sentinel = _sentinel()
    first = observe(client, headers, f"{sentinel} told me she prefers tea.")
    second = observe(client, headers, "Calendar note: tea, not coffee, for her.")
    memory = remember(
        client,
        headers,
        content=f"{sentinel} prefers tea",
        evidence=[{"observation_id": first, "start": 0, "end": len(sentinel)}],
    )
    revised = post(
        client,
        f"/v1/memories/{memory['id']}/versions",
        {
            "content": "Prefers tea",
            "evidence": [
                {"observation_id": first, "start": len(sentinel) + 20, "end": len(sentinel) + 23},
                {"observation_id": second, "start": 15, "end": 18},
            ],
        },
        headers,
    ).json()
    other = remember(
        client,
        headers,
        content="Likes tea",
        evidence=[{"observation_id": second, "start": 15, "end": 18}],
    )
    drain_until_caught_up(runtime)
    before = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()["belief"]
    assert before["grade"] == "corroborated" and len(before["support"]) == 2
    assert database_hits(runtime, sentinel)

    receipt = erase(client, headers, observation_ids=[first]).json()
    assert receipt["removed"] == {
        "observations": 1,
        "memories": 0,
        "versions": 1,
        "excerpts": 2,
        "contributions_deactivated": 2,
    }
    assert receipt["recomputed"] == [memory["id"]]
    run_every_drain(runtime)

    after = client.get(f"/v1/memories/{memory['id']}", headers=headers).json()
    assert after["status"] == "current"
    belief = after["belief"]
    assert belief["current_version_id"] == revised["version_id"]
    assert belief["grade"] == "supported" and len(belief["support"]) == 1
    history = client.get(f"/v1/memories/{memory['id']}/history", headers=headers).json()
    assert [v["content"] for v in history["versions"]] == [None, "Prefers tea"]
    assert history["versions"][0]["erased"]["id"] == receipt["id"]
    assert history["erased"] is None
    assert [c["active"] for c in history["versions"][1]["contributions"]] == [False, True]
    untouched = client.get(f"/v1/memories/{other['id']}", headers=headers).json()["belief"]
    assert untouched["grade"] == "supported"
    assert client.get(f"/v1/observations/{second}/content", headers=headers).status_code == 200
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(f'VACUUM FULL "{runtime.database.schema}".payloads')
    assert database_hits(runtime, sentinel) == {}
    assert sentinel not in export_text(client, headers)


def test_erasing_a_memory_leaves_its_sources_and_recomputes_what_links_to_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "I moved to Lisbon.")
    old = remember(client, headers, type="fact", content="Lives in Porto")
    new = remember(
        client,
        headers,
        type="fact",
        content="Lives in Lisbon",
        evidence=[{"observation_id": obs, "start": 2, "end": 17}],
    )
    post(
        client,
        f"/v1/memories/{new['id']}/edges",
        {"kind": "supersedes", "target_id": old["id"]},
        headers,
    )
    drain_until_caught_up(runtime)
    receipt = erase(client, headers, memory_ids=[new["id"]]).json()
    assert receipt["removed"]["memories"] == 1 and receipt["removed"]["observations"] == 0
    assert receipt["recomputed"] == [old["id"]]
    drain_until_caught_up(runtime)
    assert client.get(f"/v1/memories/{new['id']}", headers=headers).json()["status"] == "erased"
    # Erasing the memory is not erasing (or expiring, or retracting) its source.
    content = client.get(f"/v1/observations/{obs}/content", headers=headers)
    assert content.status_code == 200 and content.text == "I moved to Lisbon."
    assert client.get(f"/v1/memories/{old['id']}", headers=headers).json()["status"] == "current"
    # An erased memory takes no new versions; an erased observation cannot be cited.
    refused = post(client, f"/v1/memories/{new['id']}/versions", {"content": "x"}, headers)
    assert refused.status_code == 409
    assert erase(client, headers, observation_ids=[obs]).status_code == 201
    cite = post(
        client,
        "/v1/memories",
        {
            "type": "fact",
            "scope": "user",
            "content": "Lives in Lisbon",
            "evidence": [{"observation_id": obs, "start": 0, "end": 1}],
        },
        headers,
    )
    assert cite.status_code == 422 and problem_slug(cite) == "evidence-erased"


def test_bad_erasure_requests_write_nothing(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "to keep")
    theirs = observe(client, other_tenant.headers(), "theirs")
    writer, reader, stranger = (
        tenant.headers("writer"),
        tenant.headers("reader"),
        other_tenant.headers(),
    )
    before = snapshot()
    cases = [
        ({"observation_ids": [], "memory_ids": [], "reason": "x"}, headers, 422),
        ({"observation_ids": [obs], "reason": "   "}, headers, 422),
        ({"observation_ids": [obs]}, headers, 422),
        ({"observation_ids": [str(uuid.uuid4())], "reason": "x"}, headers, 404),
        ({"observation_ids": [obs, theirs], "reason": "x"}, headers, 404),
        ({"memory_ids": [obs], "reason": "x"}, headers, 404),
        ({"observation_ids": [obs], "reason": "x"}, writer, 403),
        ({"observation_ids": [obs], "reason": "x"}, reader, 403),
        ({"observation_ids": [obs], "reason": "x"}, stranger, 404),
        ({"observation_ids": [obs], "reason": "x"}, {}, 401),
        ({"observation_ids": ["not-a-uuid"], "reason": "x"}, headers, 422),
    ]
    for body, who, status in cases:
        response = client.post("/v1/erasures", json=body, headers=who)
        assert response.status_code == status, (body, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    assert snapshot() == before
    assert client.get(f"/v1/observations/{obs}/content", headers=headers).text == "to keep"


def test_the_same_erasure_again_returns_its_receipt(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    obs = observe(client, headers, "once")
    first = erase(client, headers, observation_ids=[obs])
    again = erase(client, headers, observation_ids=[obs])
    assert first.status_code == 201 and again.status_code == 200
    assert again.json() == first.json()
    assert count_events(runtime, tenant, "ObservationErased") == 1
    different = erase(client, headers, observation_ids=[obs], reason="another reason")
    assert different.status_code == 409 and problem_slug(different) == "conflict"


def test_receipts_and_tenant_deletion_refuse_bad_input(
    client: TestClient, tenant: Tenant, snapshot: Any
) -> None:
    headers = tenant.headers()
    memory = remember(client, headers)
    forgot = post(client, f"/v1/memories/{memory['id']}/forget", {"reason": "old"}, headers)
    before = snapshot()
    for path, status in (
        ("/v1/erasures/not-a-uuid", 422),
        (f"/v1/erasures/{uuid.uuid4()}", 404),
        (f"/v1/erasures/{forgot.json()['id']}", 404),  # a decision, but not an erasure
    ):
        response = client.get(path, headers=headers)
        assert response.status_code == status, (path, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
    for query, status in (("?reason=", 422), ("?reason=" + "x" * 1001, 422)):
        response = client.delete("/v1/tenant" + query, headers=headers)
        assert response.status_code == status, (query, response.text)
    assert snapshot() == before
