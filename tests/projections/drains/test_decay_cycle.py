"""The decay cycle on real PostgreSQL with a fake clock: duplicates first, fade and its
clearing, prune as proposals or archival, the collapse guard, one snapshot time, a
cycle killed mid-write, and the schedule."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.importance import HeuristicImportance, ImportanceInput
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.decay_cycle import (
    CycleReport,
    ScheduledCycle,
    run_cycle,
    slot_of,
)
from palimpsest.projections.history.verify import verify
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, count_events, drain_until_caught_up, index_until_caught_up
from tests.projections.drains.killing import drain_process, kill_mid_write

NOW = datetime.now(UTC).replace(microsecond=0)


@contextmanager
def app_clock(client: TestClient, at: datetime) -> Iterator[None]:
    """Let the app's reads (access stamps) see ``at`` as now."""
    app: Any = client.app
    before = app.state.clock
    app.state.clock = lambda: at
    try:
        yield
    finally:
        app.state.clock = before


def set_policy(client: TestClient, tenant: Tenant, **values: Any) -> dict[str, Any]:
    response = client.put("/v1/tenant/forgetting", json=values, headers=tenant.headers())
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def cycle(
    client: TestClient,
    runtime: Runtime,
    tenant: Tenant,
    at: datetime,
    *,
    dry_run: bool = False,
    guard: ProposalSettings | None = None,
    writer: Writer | None = None,
) -> CycleReport:
    drain_until_caught_up(runtime)
    app: Any = client.app
    return run_cycle(
        runtime.log,
        writer or app.state.writer,
        tenant.id,
        now=at,
        model_id=runtime.embedder.model_id,
        dry_run=dry_run,
        guard=guard,
    )


def belief(client: TestClient, tenant: Tenant, memory_id: str) -> dict[str, Any]:
    drain_until_caught_up(client.app.state.runtime)  # type: ignore[attr-defined]
    response = client.get(f"/v1/memories/{memory_id}", headers=tenant.headers("reader"))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_likely_duplicates_are_forced_into_the_prune_path_before_bucketing(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    text = "The production database runs PostgreSQL 16 on the eu-west-1 cluster."
    older = remember(client, headers, type="fact", content=text)["id"]
    newer = remember(client, headers, type="fact", content=text)["id"]
    other = remember(client, headers, type="fact", content="Lunch is at noon on Fridays.")["id"]
    episode = [remember(client, headers, type="event", content=text)["id"] for _ in range(2)]
    index_until_caught_up(runtime, tenant.id)

    report = cycle(client, runtime, tenant, NOW)

    # Fresh facts score far above the prune threshold: only the forced path prunes one.
    assert [d["older"] for d in report.duplicates] == [older]
    assert report.duplicates[0]["newer"] == newer
    assert report.counts["prune"] == 1 and report.by_type["fact"]["prune"] == 1
    assert not set(episode) & {d["older"] for d in report.duplicates}  # never events
    listed = client.get("/v1/proposals?action=supersede", headers=tenant.headers("reader"))
    items = listed.json()["items"]
    assert [(i["memory"]["id"], i["related"]["id"]) for i in items] == [(older, newer)]
    assert other not in {i["memory"]["id"] for i in items}
    # Then the survivors were handed to consolidation, which did not fail.
    assert report.consolidation is not None and "failed" not in report.consolidation


def test_a_faded_memory_ranks_below_an_unfaded_one_and_an_access_clears_it(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    later = NOW + timedelta(days=45)
    set_policy(client, tenant, prune_below=0.0, fade_below=0.15)
    text = "Rolled back the release after the smoke tests failed on staging."
    headers = tenant.headers("writer")
    near = remember(client, headers, type="event", scope="work", content=text)["id"]
    far = remember(client, headers, type="event", scope="archive", content=text)["id"]
    elsewhere = remember(client, headers, type="note", scope="work", content="Standup at 9.")
    index_until_caught_up(runtime, tenant.id)
    with app_clock(client, later - timedelta(days=1)):  # the tenant works in "work"
        assert client.get(f"/v1/memories/{elsewhere['id']}", headers=headers).status_code == 200

    report = cycle(client, runtime, tenant, later)
    assert far in report.faded and near not in report.faded

    with app_clock(client, later + timedelta(minutes=1)):
        recalled = post(client, "/v1/recall", {"query": text, "k": 2}, headers).json()["items"]
        # Equal similarity and salience; the newer (``far``) would win on recency unfaded.
        assert [(i["id"], i["faded"]) for i in recalled] == [(near, False), (far, True)]
        again = post(client, "/v1/recall", {"query": text, "k": 2}, headers).json()["items"]
    assert {i["id"]: i["faded"] for i in again}[far] is False  # the recall was an access
    assert belief(client, tenant, far)["belief"]["labels"]["archived"] is None  # readable


def test_a_pin_clears_the_fade_without_an_access(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    later = NOW + timedelta(days=45)
    set_policy(client, tenant, prune_below=0.0, fade_below=0.15)
    text = "Rolled back the release after the smoke tests failed on staging."
    headers = tenant.headers("writer")
    far = remember(client, headers, type="event", scope="archive", content=text)["id"]
    elsewhere = remember(client, headers, type="note", scope="work", content="Standup at 9.")
    index_until_caught_up(runtime, tenant.id)
    with app_clock(client, later - timedelta(days=1)):
        assert client.get(f"/v1/memories/{elsewhere['id']}", headers=headers).status_code == 200
    assert far in cycle(client, runtime, tenant, later).faded
    assert post(client, f"/v1/memories/{far}/pin", {}, headers).status_code in (200, 201)
    index_until_caught_up(runtime, tenant.id)
    with app_clock(client, later + timedelta(minutes=1)):
        recalled = post(client, "/v1/recall", {"query": text, "k": 1}, headers).json()["items"]
    # A person said it matters: recall does not rank it as faded, though never accessed.
    assert [(i["id"], i["faded"]) for i in recalled] == [(far, False)]


def test_prune_is_a_decay_proposal_by_default_and_applying_it_archives(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    old = remember(client, headers, type="note", content="Try the blue button colour.")["id"]
    pinned = remember(client, headers, type="note", content="The pager rota is on the wiki.")
    assert post(client, f"/v1/memories/{pinned['id']}/pin", {}, headers).status_code in (200, 201)
    set_policy(client, tenant, prune_below=0.3)

    report = cycle(client, runtime, tenant, NOW + timedelta(days=400))

    assert report.archived == [] and len(report.proposals) == 1
    assert belief(client, tenant, old)["belief"]["labels"]["archived"] is None
    listed = client.get("/v1/proposals?action=decay", headers=tenant.headers("reader")).json()
    assert [i["memory"]["id"] for i in listed["items"]] == [old]
    assert pinned["id"] not in {i["memory"]["id"] for i in listed["items"]}
    again = cycle(client, runtime, tenant, NOW + timedelta(days=401))
    assert again.proposals == []  # one open proposal per memory and action
    applied = post(client, f"/v1/proposals/{report.proposals[0]}/apply", {}, headers)
    assert applied.status_code == 201, applied.text
    assert belief(client, tenant, old)["belief"]["labels"]["archived"] is not None


def test_a_memory_pinned_while_the_cycle_reads_is_neither_pruned_nor_faded(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a note the cycle would prune and a fact it would fade
    headers = tenant.headers("writer")
    note = remember(client, headers, type="note", content="Try the blue button colour.")["id"]
    fact = remember(client, headers, type="fact", content="The office wifi is called Zeta.")["id"]
    set_policy(client, tenant, prune_below=0.3, fade_below=0.6, auto_archive_decayed=True)
    at = NOW + timedelta(days=400)
    scored = cycle(client, runtime, tenant, at, dry_run=True).scores or []
    assert {s["memory_id"]: s["bucket"] for s in scored} == {note: "prune", fact: "fade"}

    # When a person pins both, and the cycle runs before the beliefs it reads show the pins
    for memory_id in (note, fact):
        assert post(client, f"/v1/memories/{memory_id}/pin", {}, headers).status_code in (200, 201)
    app: Any = client.app
    report = run_cycle(
        runtime.log, app.state.writer, tenant.id, now=at, model_id=runtime.embedder.model_id
    )

    # Then neither is touched: a pin is the strongest keep a person gives
    assert (report.archived, report.proposals, report.faded) == ([], [], [])
    recorded = client.get(f"/v1/cycles/{report.cycle_id}", headers=headers).json()
    assert (recorded["archived"], recorded["faded"]) == ([], [])
    for memory_id in (note, fact):
        labels = belief(client, tenant, memory_id)["belief"]["labels"]
        assert labels["pinned"] is True and labels["archived"] is None, labels
    assert client.get("/v1/proposals", headers=headers).json()["items"] == []


def test_with_auto_archive_a_prune_is_archived_as_decayed_and_restore_reverses_it(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    note = remember(client, headers, type="note", content="Consider renaming the repo.")["id"]
    event = remember(client, headers, type="event", content="Deployed build 41 to staging.")["id"]
    set_policy(client, tenant, prune_below=0.3, auto_archive_decayed=True)

    report = cycle(client, runtime, tenant, NOW + timedelta(days=400))

    assert report.archived == [note]  # events are proposed, never archived directly
    assert len(report.proposals) == 1
    archived = belief(client, tenant, note)["belief"]["labels"]["archived"]
    assert archived["reason"] == "decayed"
    assert belief(client, tenant, event)["belief"]["labels"]["archived"] is None
    restored = post(client, f"/v1/memories/{note}/restore", {}, headers)
    assert restored.status_code in (200, 201), restored.text
    assert belief(client, tenant, note)["belief"]["labels"]["archived"] is None


def test_the_collapse_guard_turns_archivals_past_it_into_proposals(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    notes = [
        remember(client, headers, type="note", content=f"Idea number {n}: try option {n}.")["id"]
        for n in range(5)
    ]
    set_policy(client, tenant, prune_below=0.3, auto_archive_decayed=True)
    guard = ProposalSettings(collapse_share=0.0, collapse_minimum=3)
    # The allowance is the writer's day: a writer whose clock stays at noon, so that
    # both cycles spend one day whenever the test runs.
    noon = (NOW + timedelta(days=400)).replace(hour=12, minute=0, second=0)
    writer = Writer(runtime.log, CapturePolicy(timedelta(days=1), timedelta(days=1)), lambda: noon)

    report = cycle(client, runtime, tenant, noon, guard=guard, writer=writer)

    assert len(report.archived) == 3 and report.held_back == 2
    assert len(report.proposals) == 2
    assert set(report.archived) | set(notes) == set(notes)
    later = cycle(client, runtime, tenant, noon + timedelta(hours=1), guard=guard, writer=writer)
    assert later.archived == []  # the day's archivals are spent


def test_every_score_of_a_cycle_is_taken_at_one_snapshot_time(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    for n in range(6):
        remember(client, headers, type="note", content=f"Note {n} about the build cache.")
    ticks = iter(range(1000))

    def ticking() -> datetime:  # a clock that moves a day at every reading
        return NOW + timedelta(days=30 + next(ticks))

    report = cycle(client, runtime, tenant, ticking(), dry_run=True)

    assert report.snapshot_at == NOW + timedelta(days=30)
    recencies = {round(s["factors"]["recency"], 3) for s in report.scores or []}
    assert recencies == {0.5}  # 30 days after writing, at the notes' 30-day half-life
    assert len(report.scores or []) == 6


def test_a_dry_run_writes_nothing(
    client: TestClient, runtime: Runtime, tenant: Tenant, snapshot: Any
) -> None:
    remember(client, tenant.headers("writer"), type="note", content="Old idea.")
    set_policy(client, tenant, prune_below=0.3)
    drain_until_caught_up(runtime)
    before = snapshot()
    report = cycle(client, runtime, tenant, NOW + timedelta(days=400), dry_run=True)
    assert report.counts["prune"] == 1 and report.proposals == []
    assert snapshot() == before


def test_a_cycle_killed_mid_write_leaves_nothing_and_the_next_run_completes(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    fading = remember(client, headers, type="fact", content="The office wifi is called Zeta.")
    remember(client, headers, type="event", content="Met the vendor on Tuesday.")
    set_policy(client, tenant, prune_below=0.25, fade_below=0.6)
    drain_until_caught_up(runtime)
    at = NOW + timedelta(days=400)
    code = (
        "from datetime import datetime, timedelta\n"
        "from uuid import UUID\n"
        "from palimpsest.projections.commands.writer import CapturePolicy, Writer\n"
        "from palimpsest.projections.drains.decay_cycle import run_cycle\n"
        "w = Writer(log, CapturePolicy(timedelta(0), timedelta(0)), clock=datetime.now)\n"
        f"run_cycle(log, w, UUID('{tenant.id}'), now=datetime.fromisoformat('{at.isoformat()}'),"
        " model_id='none')\n"
    )
    kill_mid_write(
        runtime,
        tenant.id,
        start=lambda: drain_process(runtime, code),
        hold="INSERT INTO {schema}.memory_fades (tenant_id, memory_id, cycle_id, position)"
        " VALUES (%s, %s, %s, 0) RETURNING memory_id",
        params=(tenant.id, UUID(fading["id"]), tenant.id),
        table="memory_fades",
    )
    # Nothing: the write waits for an answer (its check of what it read) before it
    # sends COMMIT (store/_pipelined.py), so the kill lands before COMMIT is sent.
    for topic in ("CycleCompleted", "RetentionProposed"):
        assert count_events(runtime, tenant, topic) == 0, topic
    assert client.get("/v1/proposals", headers=headers).json()["items"] == []

    report = cycle(client, runtime, tenant, at)

    assert fading["id"] in report.faded and len(report.proposals) == 1
    assert count_events(runtime, tenant, "CycleCompleted") == 1
    recorded = client.get(f"/v1/cycles/{report.cycle_id}", headers=headers).json()
    assert recorded["faded"] == report.faded and recorded["proposals"] == report.proposals


@pytest.mark.slow
def test_the_schedule_runs_an_enabled_tenant_once_per_slot(
    client: TestClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    for who in (tenant, other_tenant):
        remember(client, who.headers("writer"), type="note", content="A note.")
    set_policy(client, tenant, enabled=True, schedule_minutes=60)
    drain_until_caught_up(runtime)
    app: Any = client.app
    scheduled = ScheduledCycle(runtime.log, app.state.writer, lambda: runtime.embedder.model_id)
    at = slot_of(NOW + timedelta(days=3), 60) + timedelta(minutes=5)

    first = [r.tenant_id for r in scheduled(at)]
    second = [r.tenant_id for r in scheduled(at + timedelta(minutes=50))]
    next_slot = [r.tenant_id for r in scheduled(at + timedelta(minutes=60))]

    assert tenant.id in first and other_tenant.id not in first  # not enabled
    assert tenant.id not in second
    assert tenant.id in next_slot


def test_verify_covers_the_cycles_and_the_fades(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    note = remember(client, headers, type="note", content="Maybe switch CI providers.")["id"]
    set_policy(client, tenant, prune_below=0.0, fade_below=0.45)
    faded = cycle(client, runtime, tenant, NOW + timedelta(days=60))
    assert faded.faded == [note]
    drain_until_caught_up(runtime)
    assert verify(runtime.database, tenant=tenant.id).divergences == []
    with app_clock(client, NOW + timedelta(days=61)):
        client.get(f"/v1/memories/{note}", headers=headers)
    kept = cycle(client, runtime, tenant, NOW + timedelta(days=61, hours=1))
    assert kept.unfaded == [note]
    drain_until_caught_up(runtime)

    assert verify(runtime.database, tenant=tenant.id).divergences == []


def test_an_importance_given_on_write_is_scored_and_at_the_floor_never_pruned(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    vital = remember(client, headers, type="event", content="Signed the contract.", importance=1)
    plain = remember(client, headers, type="event", content="Had coffee with Sam.")
    trivial = remember(client, headers, type="event", content="Coffee again.", importance=0.0)
    # Importance weighs nothing in the score here: only the floor protects ``vital``.
    set_policy(client, tenant, weights={"importance": 0.0}, prune_below=0.3)

    report = cycle(client, runtime, tenant, NOW + timedelta(days=400), dry_run=True)

    scores = {s["memory_id"]: s for s in report.scores or []}
    assert scores[vital["id"]]["factors"]["importance"] == 1.0
    assert scores[vital["id"]]["bucket"] == "fade"  # at the floor: faded, never pruned
    # The heuristic's unsupported event (0.1), discounted for saying little.
    expected = HeuristicImportance().importance(
        ImportanceInput("event", "unsupported", False, text="Had coffee with Sam.")
    )
    assert 0 < expected < 0.1
    assert scores[plain["id"]]["factors"]["importance"] == pytest.approx(expected, abs=1e-3)
    assert scores[trivial["id"]]["factors"]["importance"] == 0.0
    assert scores[plain["id"]]["bucket"] == scores[trivial["id"]]["bucket"] == "prune"
    for bad in (1.5, -0.1, "high", True):
        refused = post(
            client,
            "/v1/memories",
            {"type": "event", "scope": "user", "content": "x", "importance": bad},
            headers,
        )
        assert refused.status_code == 422, (bad, refused.text)


def test_a_rejected_decay_proposal_holds_until_the_memory_gets_a_new_version(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    headers = tenant.headers("writer")
    old = remember(client, headers, type="note", content="Switch to tabs.")["id"]
    set_policy(client, tenant, prune_below=0.3)
    first = cycle(client, runtime, tenant, NOW + timedelta(days=400))
    rejected = post(client, f"/v1/proposals/{first.proposals[0]}/reject", {"reason": "no"}, headers)
    assert rejected.status_code == 201, rejected.text

    assert cycle(client, runtime, tenant, NOW + timedelta(days=401)).proposals == []
    revised = post(client, f"/v1/memories/{old}/versions", {"content": "Use tabs."}, headers)
    assert revised.status_code == 201, revised.text
    assert len(cycle(client, runtime, tenant, NOW + timedelta(days=402)).proposals) == 1
