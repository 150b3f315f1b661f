"""Rebuild, verify and replay: read models reproducible from the log, exactly."""

from __future__ import annotations

import json
import random
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from palimpsest.api.cli import main
from palimpsest.domain.tenant import principal_id_for
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.consolidation import ReflectSpec
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._tenant_erasure import erase_deleted_tenants
from palimpsest.projections.history.rebuild import rebuild
from palimpsest.projections.history.replay import replay_beliefs
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.tenancy import set_tenant
from palimpsest.projections.views.read_models import TABLES, TableSpec
from tests.api.helpers import observe, post, remember
from tests.conftest import RunDatabase, Tenant, drain_until_caught_up


def _populate(client: TestClient, tenant: Tenant, rng: random.Random, memories: int = 12) -> None:
    """A varied store: versions, evidence from several models, edges, withdrawals,
    retractions, forgets, restores and pins."""
    headers = tenant.headers()
    observations = [
        observe(client, headers, f"observation number {i} says things") for i in range(4)
    ]
    ids: list[str] = []
    for i in range(memories):
        cited = rng.sample(observations, rng.randint(0, 2))
        created = remember(
            client,
            headers,
            type=rng.choice(["fact", "preference", "decision", "note"]),
            project=rng.choice([None, "alpha", "beta"]),
            content=f"memory {i}",
            model_id=rng.choice(["judge-1.4", "judge-2.0"]),
            evidence=[{"observation_id": o, "start": 0, "end": 11} for o in cited],
        )
        ids.append(created["id"])
    for memory_id in rng.sample(ids, 5):
        post(
            client,
            f"/v1/memories/{memory_id}/versions",
            {
                "content": "revised",
                "evidence": [{"observation_id": rng.choice(observations), "start": 0, "end": 11}],
            },
            headers,
        )
    for _ in range(6):
        a, b = rng.sample(ids, 2)
        kind = rng.choice(["supersedes", "conflicts_with", "extends", "derived_from"])
        post(client, f"/v1/memories/{a}/edges", {"kind": kind, "target_id": b}, headers)
    post(client, "/v1/proposers/model=judge-1.4/withdraw", {}, headers)
    post(client, f"/v1/observations/{observations[0]}/retract", {}, headers)
    for memory_id in rng.sample(ids, 3):
        post(client, f"/v1/memories/{memory_id}/forget", {"reason": "tidy"}, headers)
    post(client, f"/v1/memories/{ids[0]}/pin", {}, headers)
    post(client, f"/v1/memories/{ids[1]}/restore", {}, headers)
    client.put("/v1/tenant/retention", json={"raw_hours": 240}, headers=headers)
    # Proposals: one rejected, one applied, one dismissed (none left open)
    judged_ids = [remember(client, headers, content=f"judged {i}")["id"] for i in range(3)]
    verdicts = [
        {"memory_id": judged_ids[0], "action": "archive", "confidence": 0.99},
        {"memory_id": judged_ids[1], "action": "archive", "confidence": 0.99},
        {"memory_id": judged_ids[2], "action": "keep", "confidence": 0.9},
    ]
    judged = post(client, "/v1/forgetting/verdicts", {"verdicts": verdicts}, headers)
    assert judged.status_code == 201, judged.text
    first, second, _ = (r["id"] for r in judged.json()["results"])
    rejected = post(client, f"/v1/proposals/{first}/reject", {"reason": "still true"}, headers)
    assert rejected.status_code == 201, rejected.text
    assert post(client, f"/v1/proposals/{second}/apply", {}, headers).status_code == 201
    reflected = _reflection(client, tenant)
    _decay_cycle(client, tenant)
    erased = post(
        client,
        "/v1/erasures",
        {
            "observation_ids": [observations[1]],
            "memory_ids": [ids[2], reflected],
            "reason": "asked to",
        },
        headers,
    )
    assert erased.status_code == 201, erased.text


def _decay_cycle(client: TestClient, tenant: Tenant) -> None:
    """A decay cycle that fades every live unpinned memory (fresh memories score about
    0.6), so ``decay_cycles`` and ``memory_fades`` hold rows."""
    drain_until_caught_up(tenant.runtime)
    policy = {"fade_below": 0.99, "prune_below": 0.0}
    assert client.put("/v1/tenant/forgetting", json=policy, headers=tenant.headers()).is_success
    ran = post(client, "/v1/cycles", {}, tenant.headers())
    assert ran.status_code == 200 and ran.json()["faded"], ran.text


def _reflection(client: TestClient, tenant: Tenant) -> str:
    """Two reflections drawn from new memories (as consolidation records them); return
    a source the erasure takes, so one of them is redacted."""
    sources = [remember(client, tenant.headers(), content=f"pattern {i}") for i in range(3)]
    caller = Caller(tenant.id, principal_id_for(tenant.id, "consolidation"), "c", "writer")
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    writer = Writer(tenant.runtime.log, policy, clock=lambda: datetime.now(UTC))
    seen = [(UUID(m["id"]), UUID(m["version_id"])) for m in sources]
    for n, drawn in enumerate((seen[:2], seen[1:])):
        spec = ReflectSpec(seen=tuple(drawn), content=f"insight {n}", model="m", cycle_id=uuid4())
        writer.write(caller, [spec], batch=False)
    return str(sources[0]["id"])


@pytest.mark.slow
def test_verify_finds_nothing_on_a_store_built_by_live_writes(
    client: TestClient, tenant: Tenant, other_tenant: Tenant, runtime: Runtime
) -> None:
    remember(client, other_tenant.headers())
    _populate(client, tenant, random.Random(1))
    # Pending memories are compared at their published revision; then again caught up.
    pending = verify(runtime.database, tenant=tenant.id)
    assert pending.divergences == [] and pending.pending > 0
    drain_until_caught_up(runtime)
    report = verify(runtime.database, tenant=tenant.id)
    assert report.divergences == []
    assert report.pending == 0 and report.rows > 50 and report.events > 50
    everything = verify(runtime.database)
    assert everything.divergences == [] and everything.tenants > 1


def _fresh_value(value: Any, rng: random.Random, column: str = "") -> Any:
    if value is None and column in ("part_of", "decision_id", "current_version_id"):
        return uuid4()
    if value is None and column in ("decided_at", "faded_at"):
        return datetime(2026, 1, 1, tzinfo=UTC)
    if column == "probability":
        return 0.5 if value is None else value / 2
    if column == "status":  # the proposal statuses the table's check allows
        return rng.choice([s for s in ("applied", "rejected", "dismissed") if s != value])
    if value is None and column.endswith("_position"):
        return 1
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value - 1 if value > 1 else value + 1
    if isinstance(value, UUID):
        return uuid4()
    if isinstance(value, dict):
        return psycopg.types.json.Jsonb({**value, "grade": "tampered"})
    if isinstance(value, list):
        return [*value, uuid4()]
    if hasattr(value, "tzinfo"):
        return value + timedelta(seconds=rng.randint(1, 3600))
    if value is None:
        return "tampered"
    return f"{value}-tampered"


def _mutate_once(
    conn: psycopg.Connection[Any], schema: str, tenant_id: UUID, spec: TableSpec, rng: random.Random
) -> tuple[str, dict[str, Any], Any]:
    """Change, delete or insert one row; return (operation, the row, an undo callback)."""
    table = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(spec.name))
    columns = spec.columns
    with conn.transaction(), conn.cursor() as cur:
        set_tenant(cur, tenant_id)
        # The tenant is named: the embedded owner is a superuser, which bypasses RLS.
        cur.execute(
            sql.SQL("SELECT {} FROM {} WHERE tenant_id = %s ORDER BY random() LIMIT 1").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)), table
            ),
            (tenant_id,),
        )
        found = cur.fetchone()
    assert found is not None, spec.name
    row = dict(zip(columns, found, strict=True))
    where = sql.SQL(" AND ").join(
        [sql.SQL("{} = %s").format(sql.Identifier(c)) for c in ("tenant_id", *spec.key)]
    )
    key_values = [tenant_id, *(row[c] for c in spec.key)]
    # A table keyed by the tenant alone holds one row per tenant: nothing to insert.
    operation = rng.choice(["change", "delete", "insert"] if spec.key else ["change", "delete"])

    def run(statement: sql.Composed, params: list[Any]) -> None:
        with conn.transaction(), conn.cursor() as cur:
            set_tenant(cur, tenant_id)
            cur.execute(statement, params)

    def reinsert() -> None:
        run(
            sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                table,
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            ),
            [psycopg.types.json.Jsonb(v) if isinstance(v, dict) else v for v in row.values()],
        )

    if operation == "change":
        # A requested revision may only be higher (not a divergence); whether the drain
        # quarantined a memory yet is not compared (verify lists unprojectable memories).
        uncompared = {"requested", "unprojectable_at", "unprojectable_error"}
        choices = [c for c in spec.values if not (spec.name == "revisions" and c in uncompared)]
        if spec.name == "retention_proposals":
            # Which action, and whether it relates a memory, are checked together by the
            # table: a change to one alone cannot be stored.
            choices = [c for c in choices if c != "action"]
            if row["related_memory_id"] is None:
                choices.remove("related_memory_id")
        column = rng.choice(choices or list(spec.columns))
        new = _fresh_value(row[column], rng, column)
        run(
            sql.SQL("UPDATE {} SET {} = %s WHERE ").format(table, sql.Identifier(column)) + where,
            [new, *key_values],
        )

        changed_key = [tenant_id, *(new if c == column else row[c] for c in spec.key)]

        def undo() -> None:
            run(sql.SQL("DELETE FROM {} WHERE ").format(table) + where, changed_key)
            reinsert()

        return f"change {column}", row, undo
    if operation == "delete":
        run(sql.SQL("DELETE FROM {} WHERE ").format(table) + where, key_values)
        return "delete", row, reinsert
    copy = {**row, **{c: _fresh_value(row[c], rng) for c in spec.key if isinstance(row[c], UUID)}}
    if copy == row:  # a key without a uuid column: change its text part
        copy[spec.key[0]] = _fresh_value(row[spec.key[0]], rng)
    run(
        sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            table,
            sql.SQL(", ").join(map(sql.Identifier, columns)),
            sql.SQL(", ").join(sql.Placeholder() * len(columns)),
        ),
        [psycopg.types.json.Jsonb(v) if isinstance(v, dict) else v for v in copy.values()],
    )
    new_key = [tenant_id, *(copy[c] for c in spec.key)]
    return (
        "insert",
        copy,
        lambda: run(sql.SQL("DELETE FROM {} WHERE ").format(table) + where, new_key),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "way",
    [
        pytest.param({}, id="whole"),
        # Each table twice, the tenant in two parts: each verify starts a worker process.
        pytest.param({"workers": 2, "split_from": 0}, id="in-parts"),
    ],
)
def test_verify_catches_every_single_row_or_field_mutation(
    way: dict[str, Any], client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    rng = random.Random(20261129)
    specs = [rng.choice(TABLES) for _ in range(120)] if not way else [*TABLES, *TABLES]
    _populate(client, tenant, rng)
    # A deletion in progress, so the tenant_deletions row is there to mutate too.
    headers = tenant.headers()
    token = client.delete("/v1/tenant", headers=headers).json()["confirmation_token"]
    assert client.delete(f"/v1/tenant?confirm={token}", headers=headers).status_code == 202
    erase_deleted_tenants(runtime.log, limit=2)
    drain_until_caught_up(runtime)
    database = runtime.database
    assert verify(database, tenant=tenant.id, **way).divergences == []
    caught: dict[str, int] = {}
    with database.owner_connection(autocommit=True) as conn:
        for trial, spec in enumerate(specs):
            operation, row, undo = _mutate_once(conn, database.schema, tenant.id, spec, rng)
            try:
                found = verify(database, tenant=tenant.id, **way).divergences
                assert found, (trial, spec.name, operation, row)
                named = {d.memory_id for d in found} | {json.dumps(d.key) for d in found}
                expected = row["memory_id"] if "memory_id" in spec.key else None
                key = json.dumps({c: str(row[c]) for c in spec.key})
                assert (str(expected) in named) if expected else (key in named), (
                    trial,
                    spec.name,
                    operation,
                    found,
                )
            finally:
                undo()
            caught[spec.name] = caught.get(spec.name, 0) + 1
    assert verify(database, tenant=tenant.id, **way).divergences == []
    assert set(caught) == {t.name for t in TABLES}  # every table was mutated


@pytest.mark.slow
def test_verify_and_rebuild_from_the_command_line(
    client: TestClient,
    tenant: Tenant,
    other_tenant: Tenant,
    runtime: Runtime,
    test_database: RunDatabase,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)
    _populate(client, tenant, random.Random(3), memories=6)
    remember(client, other_tenant.headers())  # two tenants: two worker processes
    drain_until_caught_up(runtime)
    schema = runtime.database.schema
    with runtime.database.owner_connection(autocommit=True) as conn:
        victim = conn.execute(
            f'SELECT memory_id FROM "{schema}".beliefs WHERE tenant_id = %s LIMIT 1', (tenant.id,)
        ).fetchone()
        assert victim is not None
        conn.execute(
            f"UPDATE \"{schema}\".beliefs SET grade = 'tampered' WHERE memory_id = %s",
            (victim[0],),
        )
    capsys.readouterr()
    assert main(["verify", "--tenant", str(tenant.id)]) == 1
    out, err = capsys.readouterr()
    [divergence] = [json.loads(line) for line in out.splitlines()]
    assert divergence["memory_id"] == str(victim[0]) and divergence["field"] == "grade"
    assert divergence["live"] == "tampered"
    assert "1 divergences" in err and "events/s" in err
    assert main(["rebuild", "--workers", "0"]) == 2
    capsys.readouterr()
    assert main(["rebuild", "--workers", "2"]) == 0
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["events"] > 0 and summary["workers"] == 2 and "rebuild:" in err
    assert main(["verify"]) == 0
    assert "0 divergences" in capsys.readouterr().err


def test_replay_prints_the_beliefs_at_a_position(
    client: TestClient, tenant: Tenant, runtime: Runtime, tmp_path: Any
) -> None:
    headers = tenant.headers()
    first = remember(client, headers, content="one")
    forgotten = post(
        client, f"/v1/memories/{first['id']}/forget", {"reason": "old"}, headers
    ).json()
    remember(client, headers, content="two")
    before = list(replay_beliefs(runtime, at_position=first["position"], tenant=tenant.id))
    assert [b["memory_id"] for b in before] == [first["id"]]
    assert before[0]["belief"]["labels"]["archived"] is None
    after = list(replay_beliefs(runtime, at_position=forgotten["position"], tenant=tenant.id))
    assert after[0]["belief"]["labels"]["archived"]["decision_id"] == forgotten["id"]
    as_of = client.get(
        f"/v1/memories/{first['id']}",
        headers=headers,
        params={"at_position": forgotten["position"]},
    ).json()
    assert after[0]["belief"] == as_of["belief"]  # the same projection as as-of reads


def _read_until(
    stop: threading.Event,
    client: TestClient,
    headers: dict[str, str],
    versions: dict[str, list[str]],
    failures: list[str],
    reads: list[int],
) -> None:
    """Read random memories until stopped; record errors and stale current content."""
    rng = random.Random(threading.get_ident())
    memory_ids = sorted(versions)
    while not stop.is_set():
        m = rng.choice(memory_ids)
        known = len(versions[m])
        response = client.get(f"/v1/memories/{m}", headers=headers)
        reads[0] += 1
        if response.status_code != 200:
            failures.append(f"read {response.status_code}: {response.text}")
            continue
        answer = response.json()
        if answer["status"] == "current":
            current = answer["belief"]["current_version_id"]
            if current not in versions[m][known - 1 :]:
                failures.append(f"stale: {m} served {current}, knew {versions[m][known - 1]}")


@pytest.mark.slow
def test_rebuild_under_load_serves_no_error_and_no_stale_content(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    headers = tenant.headers()
    _populate(client, tenant, random.Random(5), memories=30)
    created = [remember(client, headers, content="v0") for _ in range(8)]
    memory_ids = [m["id"] for m in created]
    versions: dict[str, list[str]] = {m["id"]: [m["version_id"]] for m in created}
    stop = threading.Event()
    failures: list[str] = []
    reads = [0]
    writes = [0]

    def writer() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            m = rng.choice(memory_ids)
            response = post(client, f"/v1/memories/{m}/versions", {"content": "next"}, headers)
            if response.status_code != 201:
                failures.append(f"write {response.status_code}: {response.text}")
                continue
            versions[m].append(response.json()["version_id"])
            writes[0] += 1
            drain_until_caught_up(runtime)

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(
            target=_read_until, args=(stop, client, headers, versions, failures, reads)
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()

    def hold_the_snapshot(_: str) -> None:
        # Called once the snapshot is replayed: let the writer commit a few writes
        # that the swap must then catch up with.
        target = writes[0] + 3
        while writes[0] < target and not failures:
            threading.Event().wait(0.01)

    try:
        done = rebuild(runtime.database, report=hold_the_snapshot)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert failures == []
    assert reads[0] > 0 and done.events > 0
    assert done.caught_up > 0  # writes landed between the snapshot and the swap
    drain_until_caught_up(runtime)
    assert verify(runtime.database).divergences == []


@pytest.mark.slow
def test_an_interrupted_rebuild_leaves_the_live_read_models_and_no_shadows(
    client: TestClient,
    tenant: Tenant,
    other_tenant: Tenant,
    runtime: Runtime,
    monkeypatch: pytest.MonkeyPatch,
    test_database: RunDatabase,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _populate(client, tenant, random.Random(11), memories=6)
    remember(client, other_tenant.headers())
    drain_until_caught_up(runtime)

    def interrupt(_: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the replay reports progress

    with pytest.raises(KeyboardInterrupt):
        rebuild(runtime.database, workers=2, report=interrupt)
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        shadows = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename LIKE 'rebuild_%%'",
            (schema,),
        ).fetchone()
    assert shadows == (0,)
    assert verify(runtime.database).divergences == []
    # From the command line, Ctrl-C is one line and exit 130.
    for name, value in test_database.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("palimpsest.api.cli._history.rebuild", lambda *a, **k: interrupt(""))
    capsys.readouterr()
    assert main(["rebuild"]) == 130
    assert "interrupted; live read models unchanged" in capsys.readouterr().err


def _schema_shape(runtime: Runtime) -> dict[str, Any]:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        return {
            "indexes": sorted(
                conn.execute(
                    "SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = %s",
                    (schema,),
                ).fetchall()
            ),
            "policies": sorted(
                conn.execute(
                    "SELECT tablename, policyname, permissive, roles::text, cmd, qual, with_check"
                    " FROM pg_policies WHERE schemaname = %s",
                    (schema,),
                ).fetchall()
            ),
            "grants": sorted(
                conn.execute(
                    "SELECT table_name, grantee, privilege_type"
                    " FROM information_schema.role_table_grants WHERE table_schema = %s",
                    (schema,),
                ).fetchall()
            ),
            "security": sorted(
                conn.execute(
                    "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class"
                    " WHERE relnamespace = %s::regnamespace AND relkind = 'r'",
                    (schema,),
                ).fetchall()
            ),
            "constraints": sorted(
                conn.execute(
                    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
                    " FROM pg_constraint WHERE connamespace = %s::regnamespace",
                    (schema,),
                ).fetchall()
            ),
        }


@pytest.mark.slow
def test_rebuild_leaves_the_schema_exactly_as_it_was(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    remember(client, tenant.headers())
    before = _schema_shape(runtime)
    rebuild(runtime.database)
    assert _schema_shape(runtime) == before
