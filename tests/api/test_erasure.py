"""Erasure: content and its lineage go, from every table, read, export and replay.

The sentinel tests write a unique string, erase it, run every drain, and then look
for it everywhere a user could find it (:mod:`tests.api.sentinel_scan`): every
text-bearing column of every table (``bytea`` decoded), the statistics ``ANALYZE``
keeps, the database's files after ``VACUUM FULL``, the tenant export, replay, the
review page, the MCP ``history`` tool and every read of the API; then again after a
rebuild. The proof runs in a database of its own, so that each search is first shown
to find the sentinel before the erasure (statistics keep every value of a small table
only): none of them can pass by looking in the wrong place.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._settings import ApiSettings
from palimpsest.api.app import create_app
from palimpsest.api.cli import main
from palimpsest.projections.commands import erasure as erasure_command
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.consolidation import MergeSpec
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.drains._consolidation import consolidate_survivors
from palimpsest.projections.drains._expiry import expire_due
from palimpsest.projections.drains._retention import apply_retention
from palimpsest.projections.drains._tenant_erasure import erase_deleted_tenants
from palimpsest.projections.runtime import Runtime, start_runtime
from tests.api.helpers import observe, post, problem_slug, remember
from tests.api.sentinel_scan import (
    Reach,
    database_places,
    replays,
    sentinel_places,
    statistics_places,
)
from tests.conftest import (
    RunDatabase,
    Tenant,
    count_events,
    drain_until_caught_up,
    fresh_database,
    index_until_caught_up,
    library_writer,
    store_snapshot,
)
from tests.projections.drains.killing import drain_process, kill_mid_write
from tests.projections.drains.test_consolidation import Knobs
from tests.projections.drains.test_decay_cycle import cycle


def _sentinel() -> str:
    return f"SENTINEL{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Quiet:
    """A database of the proof's own, its runtime and an app over it."""

    database: RunDatabase
    runtime: Runtime
    client: TestClient


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory, runtime: Runtime) -> Iterator[Quiet]:
    """A database of its own: small enough that ``ANALYZE`` keeps every value of a
    column in its statistics, and that ``VACUUM FULL`` and reading every file are quick."""
    with fresh_database(tmp_path_factory) as database:
        own = start_runtime(database.settings)
        own.use_embedder(runtime.embedder)  # the session's model, loaded once
        try:
            with TestClient(create_app(ApiSettings(), own)) as client:
                yield Quiet(database, own, client)
        finally:
            own.close()


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
    naming the erasure: content, metadata, current, as-of, history, versions."""
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


class Model:
    """A fixed answer in place of a summarising model (not a model, nor a recording
    of one): its merged text restates the notes in words of its own, as a model's
    would, and its one insight repeats the first note's secret."""

    model = "stand-in-not-a-model"

    def summarise(self, texts: Sequence[str]) -> str:
        return "In short: " + " / ".join(t.lower() for t in texts)

    def reflect(self, texts: Sequence[str]) -> list[str]:
        secret = next(w for t in texts for w in t.split() if w.startswith("SENTINEL"))
        return [f"Keeps secrets such as {secret.strip('.')} in plain notes"]


def _consolidate(
    runtime: Runtime,
    tenant: Tenant,
    survivors: list[str],
    summariser: Model | None = None,
    **knobs: Any,
) -> dict[str, Any]:
    """Consolidate ``survivors`` (a model's text by default; None: extractive)."""
    index_until_caught_up(runtime, tenant.id)
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return consolidate_survivors(
        runtime.log,
        Writer(runtime.log, policy, clock=lambda: datetime.now(UTC)),
        tenant.id,
        snapshot=datetime.now(UTC),
        policy=Knobs(**knobs),
        survivors=sorted((UUID(i) for i in survivors), key=str),
        cycle_id=uuid.uuid4(),
        dry_run=False,
        model_id=runtime.embedder.model_id,
        summariser=summariser,
    )


def _merged(client: TestClient, tenant: Tenant, sources: list[str]) -> tuple[str, str]:
    """Apply the open merge proposal whose centre is one of ``sources``; return the
    proposal and the consolidated memory it made."""
    headers = tenant.headers()
    listed = client.get("/v1/proposals?action=merge", headers=headers).json()["items"]
    [proposal] = [p for p in listed if p["memory"]["id"] in sources]
    applied = post(client, f"/v1/proposals/{proposal['id']}/apply", {"reason": "same"}, headers)
    assert applied.status_code == 201, applied.text
    [created] = [op for op in applied.json()["accepted"] if op["op"] == "create_memory"]
    return str(proposal["id"]), str(created["memory_id"])


@dataclass(frozen=True)
class Written:
    """What the proof wrote: the sentinel in every feature that stores text."""

    observation: str
    formed: str
    """A memory formed only from the observation."""
    named: list[str]
    """Memories holding the sentinel with no evidence: erased by naming them."""
    merged: str
    """The consolidated memory a person made of two of them (a model's text)."""
    proposals: list[str]
    """The applied merge, the open one, and the forgetting pass's verdict."""
    cycle: str
    kept: tuple[str, str]
    """An observation and a memory that do not hold the sentinel."""
    position: int


def _write_the_sentinel_everywhere(quiet: Quiet, tenant: Tenant, sentinel: str) -> Written:
    client, headers = quiet.client, tenant.headers()
    said = f"My passport number is {sentinel}, please remember it."
    obs = observe(client, headers, said)
    start = said.index(sentinel)
    formed = remember(
        client,
        headers,
        type="fact",
        project="vault",
        content=f"Passport number {sentinel}",
        evidence=[{"observation_id": obs, "start": start, "end": start + len(sentinel)}],
    )
    named = [
        remember(client, headers, type=kind, project="vault", content=text)["id"]
        for kind, text in (
            ("fact", f"The door code is {sentinel}"),
            ("fact", f"The door code is {sentinel}."),
            ("note", f"Write the safe combination {sentinel} down"),
            ("note", f"Write the safe combination {sentinel} down."),
        )
    ]
    # Consolidation: two merge proposals with a model's text; a person applies one.
    report = _consolidate(quiet.runtime, tenant, named, Model())
    assert report["proposed"] == 2, report
    still_open = client.get("/v1/proposals?action=merge", headers=headers).json()["items"]
    applied, merged = _merged(client, tenant, named[:2])
    [still_open] = [p for p in still_open if p["memory"]["id"] in named[2:]]
    drain_until_caught_up(quiet.runtime)
    # A reflection drawn from the survivors, and a decay cycle's report.
    reflected = _consolidate(
        quiet.runtime, tenant, [formed["id"], merged, *named[2:]], Model(), reflections_enabled=True
    )
    assert reflected["reflections"] == 1, reflected
    report_of = cycle(client, quiet.runtime, tenant, datetime.now(UTC))
    # The forgetting pass's verdict about the formed memory, for review.
    verdict = {"memory_id": formed["id"], "action": "archive", "confidence": 0.97}
    judged = post(client, "/v1/forgetting/verdicts", {"verdicts": [verdict]}, headers)
    assert judged.status_code == 201, judged.text
    [recorded] = judged.json()["results"]
    kept_obs = observe(client, headers, "The weather was fine.")
    kept = remember(client, headers, type="note", content="The weather was fine")
    index_until_caught_up(quiet.runtime, tenant.id)
    return Written(
        observation=obs,
        formed=formed["id"],
        named=named,
        merged=merged,
        proposals=[applied, still_open["id"], recorded["id"]],
        cycle=str(report_of.cycle_id),
        kept=(kept_obs, kept["id"]),
        position=formed["position"],
    )


@pytest.mark.slow
def test_erasure_leaves_nothing_behind(
    quiet: Quiet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # Given the sentinel in every feature that stores text: an observation, a memory
    # formed from it (version, excerpt, contribution), memories holding it alone, a
    # consolidated memory and merge proposals with a model's text, a reflection, a
    # decay cycle, a forgetting-pass proposal
    for name, value in quiet.database.env.items():
        monkeypatch.setenv(name, value)
    runtime, client = quiet.runtime, quiet.client
    tenant = Tenant(runtime, create_tenant(runtime.log, f"t-{uuid.uuid4().hex[:8]}"))
    headers = tenant.headers()
    sentinel = _sentinel()
    written = _write_the_sentinel_everywhere(quiet, tenant, sentinel)
    memories = [written.formed, *written.named, written.merged]
    reach = Reach(
        client,
        runtime,
        tenant,
        memory_ids=memories,
        observation_ids=[written.observation],
        proposal_ids=written.proposals,
        cycle_ids=[written.cycle],
        positions=[written.position],
        capsys=capsys,
        replay_out=tmp_path / "replay.jsonl",
    )
    assert embedding_rows(runtime, written.formed) == 1
    # Every kind of place searched holds the sentinel now.
    before = sentinel_places(reach, sentinel)
    schema = runtime.database.schema
    on_disk = quiet.database.settings.database_url is None  # the embedded owner is a superuser
    for place in (
        f"column {schema}.payloads.content",
        f"column {schema}.memory_texts.document",
        f"column {schema}.memory_lexemes.lexeme",
        f"column {schema}.lexeme_counts.lexeme",
        f"statistics {schema}.payloads.content",
        f"statistics {schema}.lexeme_counts.lexeme",
        "export",
        "review",
        f"mcp history {written.merged}",
        f"GET /v1/memories/{written.merged}/versions",
        f"GET /v1/proposals/{written.proposals[1]}",
        "POST /v1/recall (text)",
    ):
        assert place in before, (place, sorted(before))
    assert not on_disk or any(p.startswith("file ") for p in before), sorted(before)

    # When the observation and the memories holding it alone are erased
    response = erase(
        client, headers, observation_ids=[written.observation], memory_ids=written.named
    )
    assert response.status_code == 201, response.text
    receipt = response.json()
    run_every_drain(runtime)

    # Then the sentinel is nowhere
    left = sentinel_places(reach, sentinel)
    assert not left, "\n".join(sorted(left))
    assert embedding_rows(runtime, written.formed) == 0  # recall cannot find it either
    assert all(receipt["id"] in text for text in replays(reach).values())
    assert receipt["status"] == "completed" and receipt["kind"] == "erasure"
    assert receipt["removed"]["observations"] == 1
    assert client.get(f"/v1/erasures/{receipt['id']}", headers=headers).json() == receipt
    lines = [json.loads(x) for x in export_text(client, headers).splitlines()]
    assert [x["receipt"] for x in lines if x["kind"] == "erasure_receipt"] == [receipt]
    assert_reads_name_the_erasure(
        client, headers, written.observation, written.formed, written.position, receipt["id"]
    )
    # What was not named stays.
    kept = client.get(f"/v1/observations/{written.kept[0]}/content", headers=headers)
    assert kept.status_code == 200 and kept.text == "The weather was fine."
    assert client.get(f"/v1/memories/{written.kept[1]}", headers=headers).json()["status"] == (
        "current"
    )
    # A rebuild from the log brings none of it back.
    assert main(["rebuild", "--workers", "1"]) == 0
    left = sentinel_places(reach, sentinel)
    assert not left, "\n".join(sorted(left))
    assert client.get(f"/v1/memories/{written.formed}", headers=headers).json()["status"] == (
        "erased"
    )


def _derived_ops(receipt: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """The receipt's operations on what was erased as derived: (op, memory) and the
    memories each was derived from."""
    return {
        (op["op"], op["memory_id"]): set(op["derived_from"].split(","))
        for op in receipt["decision"]["accepted"]
        if "derived_from" in op
    }


def test_erasing_the_sources_of_a_consolidated_memory_erases_what_was_derived_from_them(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given two memories of a door code folded by an extractive merge a person applied
    # (letters no identifier or digest can hold: once, a version's id held "4812")
    headers = tenant.headers()
    sources = [
        remember(client, headers, type="fact", content=text)["id"]
        for text in ("The door code is KX4812", "The door code is KX4812.")
    ]
    assert _consolidate(runtime, tenant, sources)["proposed"] == 1
    _, merged = _merged(client, tenant, sources)
    shown = client.get(f"/v1/memories/{merged}/versions", headers=headers).json()
    assert "KX4812" in shown["versions"][-1]["content"]
    # When both sources are erased
    response = erase(client, headers, memory_ids=sources)
    assert response.status_code == 201, response.text
    receipt = response.json()
    drain_until_caught_up(runtime)
    # Then no read serves the door code, and the receipt names what was derived
    for read in ("versions", "history"):
        record = client.get(f"/v1/memories/{merged}/{read}", headers=headers)
        assert record.status_code == 200 and "KX4812" not in record.text, record.text
    current = client.get(f"/v1/memories/{merged}", headers=headers).json()
    assert current["status"] == "erased" and current["erasure"]["id"] == receipt["id"]
    assert _derived_ops(receipt) == {
        ("erase_version", merged): set(sources),
        ("erase_memory", merged): set(sources),
    }
    assert receipt["removed"]["memories"] == 3 and receipt["removed"]["versions"] == 3
    assert "KX4812" not in export_text(client, headers)


def test_a_memory_derived_from_one_formed_from_an_erased_observation_is_erased(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given a memory formed from an observation, merged with another from elsewhere
    # (the consolidated version cites both observations: lineage alone keeps it)
    headers = tenant.headers()
    cited = []
    for said in ("Ana: the door code is 4812.", "Bo: door code 4812, yes."):
        obs = observe(client, headers, said)
        memory = remember(
            client,
            headers,
            type="fact",
            content="The door code is 4812",
            evidence=[{"observation_id": obs, "start": 0, "end": len(said)}],
        )
        cited.append((obs, memory["id"]))
    sources = [m for _, m in cited]
    assert _consolidate(runtime, tenant, sources)["proposed"] == 1
    _, merged = _merged(client, tenant, sources)
    # When the first observation is erased
    receipt = erase(client, headers, observation_ids=[cited[0][0]]).json()
    drain_until_caught_up(runtime)
    # Then its memory goes by lineage, the merged one as derived from it, the other stays
    assert _derived_ops(receipt) == {
        ("erase_version", merged): {cited[0][1]},
        ("erase_memory", merged): {cited[0][1]},
    }
    for memory_id, status in (
        (cited[0][1], "erased"),
        (merged, "erased"),
        (cited[1][1], "current"),
    ):
        read = client.get(f"/v1/memories/{memory_id}", headers=headers).json()
        assert read["status"] == status, (memory_id, read)


def _merge_texts_held(runtime: Runtime, tenant: Tenant, start: str) -> int:
    """How many payload rows of the tenant begin with ``start`` (a model's merged text)."""
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT count(*) FROM "{runtime.database.schema}".payloads'
            " WHERE tenant_id = %s AND position(%s IN content) = 1",
            (tenant.id, start.encode()),
        ).fetchone()
    return int(row[0]) if row else 0


def test_erasing_a_source_deletes_the_text_of_a_merge_proposal_and_lists_it(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given an open merge proposal whose text a model wrote from two memories
    headers = tenant.headers()
    sources = [
        remember(client, headers, type="fact", content=text)["id"]
        for text in ("The VPN runs WireGuard", "The VPN runs WireGuard.")
    ]
    assert _consolidate(runtime, tenant, sources, Model())["proposed"] == 1
    [proposal] = client.get("/v1/proposals?action=merge", headers=headers).json()["items"]
    assert proposal["merged_content"].startswith("In short: ")
    assert _merge_texts_held(runtime, tenant, "In short: ") == 1
    # When one of them is erased
    receipt = erase(client, headers, memory_ids=[sources[0]]).json()
    # Then the proposal's text is gone from the payload store, not only hidden, and
    # the receipt lists it
    assert _merge_texts_held(runtime, tenant, "In short: ") == 0
    erased = [op for op in receipt["decision"]["accepted"] if op["op"] == "erase_merge_text"]
    assert [op["proposal_id"] for op in erased] == [proposal["id"]]
    assert erased[0]["digest"] in receipt["digests"]
    shown = client.get(f"/v1/proposals/{proposal['id']}", headers=headers).json()
    assert shown["merged_content"] is None
    applied = post(client, f"/v1/proposals/{proposal['id']}/apply", {}, headers)
    assert applied.status_code == 409 and problem_slug(applied) == "stale-proposal"


def test_an_erasure_killed_inside_its_transaction_leaves_everything_and_runs_again(
    client: TestClient, tenant: Tenant, runtime: Runtime
) -> None:
    # Given an observation, a memory formed from it and one holding the same words
    # alone, folded by a model into a consolidated memory, and an open merge proposal
    headers = tenant.headers()
    sentinel = _sentinel()
    said = f"The door code is {sentinel}."
    obs = observe(client, headers, said)
    evidence = [{"observation_id": obs, "start": 0, "end": len(said)}]
    ids = [
        remember(client, headers, type=kind, content=text, evidence=cites)["id"]
        for kind, text, cites in (
            ("fact", f"The door code is {sentinel}", evidence),
            ("fact", f"The door code is {sentinel}.", []),
            ("note", f"Write the safe combination {sentinel} down", []),
            ("note", f"Write the safe combination {sentinel} down.", []),
        )
    ]
    assert _consolidate(runtime, tenant, ids, Model())["proposed"] == 2
    _, merged = _merged(client, tenant, ids[:2])
    index_until_caught_up(runtime, tenant.id)
    before, held = store_snapshot(runtime), database_places(runtime, sentinel)
    assert _merge_texts_held(runtime, tenant, "In short: ") == 2
    # When an erasure of all of it is SIGKILLed inside its transaction, held by a row
    # lock at its last statement (the sentinel's word count): its events inserted, the
    # bytes and rows it removes before its words deleted, its COMMIT not sent (it waits
    # for its check of what was drawn from the erased memories: store/eventlog.py)
    names = ", ".join(f"UUID('{i}')" for i in ids)
    code = (
        "from datetime import datetime, timedelta\n"
        "from uuid import UUID\n"
        "from palimpsest.projections.commands.caller import Caller\n"
        "from palimpsest.projections.commands.writer import CapturePolicy, EraseSpec, Writer\n"
        "w = Writer(log, CapturePolicy(timedelta(0), timedelta(0)), clock=datetime.now)\n"
        f"c = Caller(UUID('{tenant.id}'), UUID('{tenant.admin.principal_id}'), 'a', 'admin')\n"
        f"s = EraseSpec((UUID('{obs}'),), ({names},), 'the user asked')\n"
        "w.write(c, [s], batch=False)\n"
    )
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: drain_process(runtime, code),
        hold="SELECT 1 FROM {schema}.lexeme_counts WHERE tenant_id = %s AND lexeme = %s FOR UPDATE",
        params=(tenant.id, sentinel.lower()),
        table="lexeme_counts",
    )
    # Then nothing of it happened: not an event, not a row, not a byte
    assert count_events(runtime, tenant, "MergeTextErased") == 0
    assert store_snapshot(runtime) == before
    assert database_places(runtime, sentinel) == held
    assert _merge_texts_held(runtime, tenant, "In short: ") == 2
    shown = client.get(f"/v1/memories/{merged}/versions", headers=headers).json()
    assert shown["versions"][-1]["content"].startswith("In short: ")
    # And the same erasure again removes all of it
    response = erase(client, headers, observation_ids=[obs], memory_ids=ids)
    assert response.status_code == 201, response.text
    run_every_drain(runtime)
    assert database_places(runtime, sentinel) == set()
    assert _merge_texts_held(runtime, tenant, "In short: ") == 0


def test_a_merge_committed_while_an_erasure_is_decided_is_erased_with_it(
    client: TestClient, tenant: Tenant, runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two memories of an alarm code
    headers = tenant.headers()
    written = [
        remember(client, headers, type="fact", content=text)
        for text in ("The alarm code is QZ7301", "The alarm code is QZ7301.")
    ]
    sources = [str(w["id"]) for w in written]
    seen = tuple((UUID(w["id"]), UUID(w["version_id"])) for w in written)
    made: list[str] = []
    looked = erasure_command._derived_from

    def merged_meanwhile(uow: Any, memory_ids: list[UUID]) -> dict[UUID, set[UUID]]:
        """The erasure looks for what was derived; then, before it commits, a merge of
        both memories commits (once)."""
        found = looked(uow, memory_ids)
        if not made:
            caller = Caller(tenant.id, tenant.admin.principal_id, "racer", "admin")
            merge = MergeSpec(seen=seen, content="Alarm: QZ7301", model_id=None)
            body = library_writer(runtime).write(caller, [merge], batch=False).body
            made.extend(op["memory_id"] for op in body["accepted"] if op["op"] == "create_memory")
        return found

    monkeypatch.setattr(erasure_command, "_derived_from", merged_meanwhile)
    # When both are erased
    response = erase(client, headers, memory_ids=sources)
    assert response.status_code == 201, response.text
    # Then the erasure, refused at its commit and built again, erased the merge too
    [merged] = made
    assert _derived_ops(response.json())[("erase_memory", merged)] == set(sources)
    shown = client.get(f"/v1/memories/{merged}/versions", headers=headers)
    assert "QZ7301" not in shown.text, shown.text


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
    assert database_places(runtime, sentinel)

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
    # Looked for in the store's columns and statistics (the whole scan is the proof's).
    assert database_places(runtime, sentinel) | statistics_places(runtime, sentinel) == set()
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
