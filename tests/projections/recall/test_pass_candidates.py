"""The forgetting pass's candidates: which memories a run would send to its judge.

Memory times are set through observations captured in the past (a memory's
time is the latest ``captured_at`` of its current version's evidence), and
the run's ``now`` moves forward instead of the clock. Proposals are recorded
through the write path (``ProposeSpec``), as the pass records them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

from fastapi.testclient import TestClient

from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands._spec import WriteSpec
from palimpsest.projections.commands.proposals import ProposalDecisionSpec, ProposeSpec
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import Writer
from palimpsest.projections.recall.pass_candidates import (
    PassCandidates,
    PassSettings,
    select_candidates,
)
from palimpsest.projections.runtime import Runtime
from tests.api.helpers import post, remember
from tests.conftest import Tenant, index_until_caught_up

NOW = datetime.now(UTC)

TEA = "I drink green tea every morning before work."
TEA_NOW = "I stopped drinking green tea; every morning before work I have coffee now."
CAR = "My car is a red Toyota Corolla that I bought used."
CAR_NOW = "I sold the red Toyota Corolla and my car is now a blue Honda Civic."


def _memory(
    client: TestClient,
    tenant: Tenant,
    content: str,
    *,
    days_ago: float | None = None,
    at: datetime | None = None,
    **fields: Any,
) -> UUID:
    """Create a memory whose time is ``days_ago`` before NOW (or ``at``), through an
    observation captured then; with neither, its time is when it is recorded."""
    captured = at if at is not None else None if days_ago is None else NOW - timedelta(days_ago)
    evidence = []
    if captured is not None:
        body = {"content": content, "captured_at": captured.isoformat()}
        observed = post(client, "/v1/observations", body, tenant.headers())
        assert observed.status_code == 201, observed.text
        evidence = [{"observation_id": observed.json()["id"], "start": 0, "end": len(content)}]
    fields = {"type": "fact", "scope": "user", **fields}
    made = remember(client, tenant.headers(), content=content, evidence=evidence, **fields)
    return UUID(made["id"])


def _select(
    runtime: Runtime, tenant: Tenant, *, now: datetime = NOW, **settings: Any
) -> PassCandidates:
    index_until_caught_up(runtime, tenant.id)
    return select_candidates(
        runtime.log,
        tenant.id,
        now=now,
        settings=PassSettings(**settings),
        model_id=runtime.embedder.model_id,
    )


def _singles(found: PassCandidates) -> list[UUID]:
    return [s.memory_id for s in found.singles]


def _pairs(found: PassCandidates) -> set[tuple[UUID, UUID]]:
    """The pairs as (newer, older)."""
    return {(p.newer_id, p.older_id) for p in found.pairs}


def _write(runtime: Runtime, tenant: Tenant, spec: WriteSpec) -> dict[str, Any]:
    writer = Writer(
        runtime.log, CapturePolicy(timedelta(days=30), timedelta(hours=24)), lambda: NOW
    )
    body: dict[str, Any] = writer.write(
        authenticate(runtime.log, tenant.admin.token), [spec], batch=False
    ).body
    return body


def _propose(
    runtime: Runtime,
    tenant: Tenant,
    memory_id: UUID,
    verdict: str = "keep",
    related: UUID | None = None,
) -> UUID:
    """Record a verdict as the pass would: keep verdicts dismissed, others proposed."""
    spec = ProposeSpec(
        memory_id=memory_id,
        verdict=verdict,
        related_memory_id=related,
        probability=0.95,
        distribution={verdict: 0.95, "keep" if verdict != "keep" else "archive": 0.05},
        model="test-judge",
        run_id=uuid4(),
        dismissed=verdict == "keep",
    )
    return UUID(_write(runtime, tenant, spec)["id"])


def _decided_at(runtime: Runtime, proposal_id: UUID) -> datetime:
    schema = runtime.database.schema
    with runtime.database.owner_connection() as conn:
        row = conn.execute(
            f'SELECT decided_at FROM "{schema}".retention_proposals WHERE proposal_id = %s',
            (proposal_id,),
        ).fetchone()
    assert row is not None and row[0] is not None
    decided: datetime = row[0]
    return decided


# Singles


def test_a_memory_untouched_for_the_stale_window_is_a_single(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    old = _memory(client, tenant, TEA, days_ago=90)
    recent = _memory(client, tenant, CAR, days_ago=5, scope="work")
    found = _select(runtime, tenant)
    assert _singles(found) == [old]
    [single] = found.singles
    assert single.memory_type == "fact"
    assert single.memory_time == single.freshness == NOW - timedelta(days=90)
    # Sixty days on, the recent one is stale too, and the older comes first.
    assert _singles(_select(runtime, tenant, now=NOW + timedelta(days=60))) == [old, recent]
    # A longer window keeps both fresh.
    assert _singles(_select(runtime, tenant, stale_window_days=100)) == []


def test_a_memory_is_as_old_as_its_current_versions_latest_evidence(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a memory citing observations captured 100 and 40 days ago
    first = "I drink green tea."
    second = "Every morning, before work."
    ids = []
    for content, days in ((first, 100), (second, 40)):
        body = {"content": content, "captured_at": (NOW - timedelta(days)).isoformat()}
        ids.append(post(client, "/v1/observations", body, tenant.headers()).json()["id"])
    evidence = [
        {"observation_id": ids[0], "start": 0, "end": len(first)},
        {"observation_id": ids[1], "start": 0, "end": len(second)},
    ]
    memory = remember(client, tenant.headers(), type="fact", content=TEA, evidence=evidence)
    # Then its time is the later capture
    [single] = _select(runtime, tenant).singles
    assert single.memory_time == NOW - timedelta(days=40)
    # When a new version cites nothing, its time is when that version was recorded
    # (NOW is when the module was collected: a long run reaches this test much later)
    headers = tenant.headers()
    before = datetime.now(UTC)
    revised = post(client, f"/v1/memories/{memory['id']}/versions", {"content": TEA_NOW}, headers)
    after = datetime.now(UTC)
    assert revised.status_code == 201, revised.text
    assert _select(runtime, tenant, now=after).singles == []
    [single] = _select(runtime, tenant, now=after + timedelta(days=60)).singles
    assert before - timedelta(seconds=1) < single.memory_time < after + timedelta(seconds=1)


def test_only_decisions_preferences_blockers_and_facts_are_singles(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    kinds = ("decision", "preference", "blocker", "fact", "event", "note")
    made = {
        kind: _memory(client, tenant, f"{kind}: {TEA}", days_ago=90, type=kind) for kind in kinds
    }
    singles = set(_singles(_select(runtime, tenant)))
    assert singles == {made[k] for k in ("decision", "preference", "blocker", "fact")}


def test_archived_memories_are_neither_singles_nor_paired(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    old = _memory(client, tenant, TEA, days_ago=90)
    new = _memory(client, tenant, TEA_NOW, days_ago=80)
    assert old in _singles(_select(runtime, tenant))
    forgot = post(client, f"/v1/memories/{old}/forget", {"reason": "obsolete"}, tenant.headers())
    assert forgot.status_code == 201, forgot.text
    found = _select(runtime, tenant)
    assert _singles(found) == [new]
    assert found.pairs == []


def test_a_newer_neighbour_refreshes_a_memory_and_travels_with_it(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given an old memory with two newer ones of its type, scope and project
    old = _memory(client, tenant, TEA, days_ago=200)
    near = _memory(client, tenant, TEA_NOW, days_ago=90)
    far = _memory(client, tenant, CAR, days_ago=100)
    # Then it is as fresh as the newest of them, and carries them, most similar first
    found = _select(runtime, tenant, pair_floor=None)  # the far one too
    single = next(s for s in found.singles if s.memory_id == old)
    assert single.freshness == NOW - timedelta(days=90)
    assert single.memory_time == NOW - timedelta(days=200)
    assert [n.memory_id for n in single.newer] == [near, far]
    assert single.newer[0].similarity > single.newer[1].similarity
    assert single.newer[0].memory_time == NOW - timedelta(days=90)
    assert [n.memory_id for n in _single(found, near).newer] == []
    # And only the nearest count when the single carries fewer
    [neighbour] = next(
        s for s in _select(runtime, tenant, neighbours=1).singles if s.memory_id == old
    ).newer
    assert neighbour.memory_id == near
    # When a similar memory arrives in its scope, it is fresh; in another scope, not
    _memory(client, tenant, TEA_NOW, days_ago=3, scope="work")
    _memory(client, tenant, TEA_NOW, days_ago=3, type="preference")
    _memory(client, tenant, TEA_NOW, days_ago=3, project="garden")
    assert old in _singles(_select(runtime, tenant))
    _memory(client, tenant, TEA_NOW, days_ago=3)
    assert old not in _singles(_select(runtime, tenant))


def _single(found: PassCandidates, memory_id: UUID) -> Any:
    return next(s for s in found.singles if s.memory_id == memory_id)


def test_singles_are_most_stale_first_and_capped(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    made = [
        _memory(client, tenant, text, days_ago=days, scope=scope)
        for text, days, scope in ((TEA, 50, "a"), (CAR, 300, "b"), (TEA_NOW, 100, "c"))
    ]
    assert _singles(_select(runtime, tenant)) == [made[1], made[2], made[0]]
    assert _singles(_select(runtime, tenant, singles_cap=2)) == [made[1], made[2]]


def test_a_review_refreshes_a_memory_for_the_stale_window(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given an old memory with an open proposal, and a newer neighbour after it
    old = _memory(client, tenant, TEA, days_ago=200)
    proposal = _propose(runtime, tenant, old, "archive")
    neighbour_time = datetime.now(UTC)
    _memory(client, tenant, TEA_NOW, at=neighbour_time)
    # When a person rejects the proposal
    decision = ProposalDecisionSpec(proposal_id=proposal, verdict="reject", reason="still true")
    _write(runtime, tenant, decision)
    reviewed = _decided_at(runtime, proposal)
    assert reviewed > neighbour_time
    # Then, once the neighbour is older than the window but the review is not, the
    # memory is fresh: the review, not the neighbour, is its freshness
    now = neighbour_time + timedelta(days=30) + (reviewed - neighbour_time) / 2
    assert old not in _singles(_select(runtime, tenant, now=now))
    later = _select(runtime, tenant, now=reviewed + timedelta(days=31))
    assert _single(later, old).freshness == reviewed


def test_a_verdict_holds_a_single_back_until_a_newer_memory_arrives(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    old = _memory(client, tenant, TEA, days_ago=200)
    other = _memory(client, tenant, CAR, days_ago=200, scope="work")
    assert set(_singles(_select(runtime, tenant))) == {old, other}
    # A keep verdict (dismissed) after its freshness holds it back, however much later
    _propose(runtime, tenant, old, "keep")
    assert _singles(_select(runtime, tenant, now=NOW + timedelta(days=400))) == [other]
    # A newer neighbour that arrives after the verdict reopens it
    _memory(client, tenant, TEA_NOW, at=datetime.now(UTC))
    assert old in _singles(_select(runtime, tenant, now=NOW + timedelta(days=60)))


# Pairs


def test_pairs_are_of_one_type_scope_and_project_newer_first(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    older = _memory(client, tenant, TEA, days_ago=100)
    # Recorded first, but captured later: time, not log order, says which is newer
    newer = _memory(client, tenant, TEA_NOW, days_ago=10)
    elsewhere = [
        _memory(client, tenant, TEA_NOW, days_ago=10, scope="work"),
        _memory(client, tenant, TEA_NOW, days_ago=10, type="preference"),
        _memory(client, tenant, TEA_NOW, days_ago=10, project="garden"),
    ]
    in_project = [
        _memory(client, tenant, TEA, days_ago=30, project="garden", scope="home"),
        _memory(client, tenant, TEA_NOW, days_ago=20, project="garden", scope="home"),
    ]
    found = _select(runtime, tenant)
    pairs = _pairs(found)
    assert (newer, older) in pairs
    assert (in_project[1], in_project[0]) in pairs
    assert not any(older in pair and e in pair for pair in pairs for e in elsewhere)
    pair = next(p for p in found.pairs if p.older_id == older)
    assert pair.older_time == NOW - timedelta(days=100)
    assert pair.newer_time == NOW - timedelta(days=10)
    assert 0.5 < pair.similarity < 1.0


def test_the_newer_of_a_pair_is_the_later_in_time_not_in_the_log(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    later = _memory(client, tenant, TEA_NOW, days_ago=10)
    earlier = _memory(client, tenant, TEA, days_ago=100)
    assert _pairs(_select(runtime, tenant)) == {(later, earlier)}


def test_events_notes_and_blockers_are_never_paired(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    for kind in ("event", "note", "blocker"):
        _memory(client, tenant, TEA, days_ago=100, type=kind)
        _memory(client, tenant, TEA, days_ago=10, type=kind)
    assert _select(runtime, tenant).pairs == []
    a = _memory(client, tenant, TEA, days_ago=100, type="decision")
    b = _memory(client, tenant, TEA, days_ago=10, type="decision")
    assert _pairs(_select(runtime, tenant)) == {(b, a)}


def test_each_memory_pairs_with_its_nearest_only(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    tea, tea_now = _memory(client, tenant, TEA), _memory(client, tenant, TEA_NOW)
    car, car_now = _memory(client, tenant, CAR), _memory(client, tenant, CAR_NOW)
    for fusion in ("rrf", "cosine"):
        nearest = _pairs(_select(runtime, tenant, pair_k=1, pair_fusion=fusion))
        assert nearest == {(tea_now, tea), (car_now, car)}
    # Without a floor each pairs with all three; the default floor keeps tea from cars
    assert len(_pairs(_select(runtime, tenant, pair_k=3, pair_floor=None))) == 6
    assert _pairs(_select(runtime, tenant, pair_k=3)) == {(tea_now, tea), (car_now, car)}
    # A floor leaves out the nearest that are not near enough
    assert _select(runtime, tenant, pair_k=3, pair_floor=0.99).pairs == []


def test_pairs_with_a_stale_older_side_rank_first_and_are_capped(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    stale = (
        _memory(client, tenant, CAR, days_ago=200),
        _memory(client, tenant, CAR_NOW, days_ago=100),
    )
    fresh = (
        _memory(client, tenant, TEA, days_ago=10, scope="work"),
        _memory(client, tenant, TEA, days_ago=5, scope="work"),
    )
    found = _select(runtime, tenant)
    assert [(p.older_id, p.older_stale) for p in found.pairs] == [
        (stale[0], True),
        (fresh[0], False),
    ]
    # The identical (fresh) pair is the more similar, yet ranks second
    assert found.pairs[1].similarity > found.pairs[0].similarity
    assert [p.older_id for p in _select(runtime, tenant, pairs_cap=1).pairs] == [stale[0]]


def test_a_pair_joined_by_an_edge_is_left_out_until_the_edge_is_retracted(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    older = _memory(client, tenant, TEA, days_ago=100)
    newer = _memory(client, tenant, TEA_NOW, days_ago=10)
    assert _pairs(_select(runtime, tenant)) == {(newer, older)}
    # An edge either way leaves the pair out
    body = {"kind": "conflicts_with", "target_id": str(newer), "reason": "they disagree"}
    edge = post(client, f"/v1/memories/{older}/edges", body, tenant.headers())
    assert edge.status_code == 201, edge.text
    assert _select(runtime, tenant).pairs == []
    # A retracted edge no longer counts
    edge_id = edge.json()["id"]
    retract = f"/v1/memories/{older}/edges/{edge_id}/retract"
    retracted = post(client, retract, {"reason": "they agree after all"}, tenant.headers())
    assert retracted.status_code == 201, retracted.text
    assert _pairs(_select(runtime, tenant)) == {(newer, older)}


def test_a_verdict_on_a_pair_holds_it_back_until_a_newer_memory_arrives(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    older = _memory(client, tenant, TEA, days_ago=100)
    newer = _memory(client, tenant, TEA_NOW, days_ago=10)
    car = (
        _memory(client, tenant, CAR, days_ago=100, scope="car"),
        _memory(client, tenant, CAR_NOW, days_ago=10, scope="car"),
    )
    both = {(newer, older), (car[1], car[0])}
    assert _pairs(_select(runtime, tenant)) == both
    # A verdict about the newer memory alone is not about the pair
    _propose(runtime, tenant, newer, "keep")
    _propose(runtime, tenant, car[1], "keep")
    assert _pairs(_select(runtime, tenant)) == both
    # A verdict relating the two, or about the older alone, holds the pair back
    _propose(runtime, tenant, older, "conflict", related=newer)
    _propose(runtime, tenant, car[0], "keep")
    assert _select(runtime, tenant).pairs == []
    # Until a newer memory moves their freshness past it
    latest = _memory(client, tenant, TEA_NOW + " Still coffee.", at=datetime.now(UTC))
    assert (newer, older) in _pairs(_select(runtime, tenant))
    assert all(latest in pair or older in pair for pair in _pairs(_select(runtime, tenant)))


def test_another_tenants_memories_are_never_candidates(
    client: TestClient, runtime: Runtime, tenant: Tenant, other_tenant: Tenant
) -> None:
    _memory(client, other_tenant, TEA, days_ago=100)
    _memory(client, other_tenant, TEA_NOW, days_ago=90)
    mine = _memory(client, tenant, TEA_NOW, days_ago=95)
    found = _select(runtime, tenant)
    assert _singles(found) == [mine] and found.pairs == []
