"""The collapse guard: one daily allowance per tenant, counted in memories, reserved in
the transaction of the write that archives, and shared by every path that archives
or supersedes without a person's own forget: applying proposals, the decay cycle's
automatic archives, and consolidation's automatic merges.

The writes here go through the library's write path with a clock fixed at noon, so
that every write of a test falls on one UTC day whenever the test runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.api._problems import problem_of
from palimpsest.domain.errors import CollapseGuardError, PalimpsestError, PermissionDeniedError
from palimpsest.domain.memory import Memory
from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands.caller import Caller
from palimpsest.projections.commands.consolidation import ProposeMergeSpec
from palimpsest.projections.commands.proposals import (
    ProposalDecisionSpec,
    ProposalSettings,
    ProposeSpec,
)
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import Writer, WriteSpec
from palimpsest.projections.drains.decay_cycle import run_cycle
from palimpsest.projections.runtime import Runtime, table_writers
from palimpsest.projections.store.aggregates import aggregates_of
from palimpsest.projections.store.eventlog import EventLog
from palimpsest.projections.store.settings import DatabaseSettings
from tests.api.helpers import remember
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up
from tests.projections.drains.test_decay_cycle import set_policy

NOON = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)
"""The writers' clock: the day every allowance of this module is spent on."""

THREE = ProposalSettings(collapse_share=0.0, collapse_minimum=3)
"""A guard that allows three memories a day, whatever the tenant holds."""


def _writer(log: EventLog) -> Writer:
    policy = CapturePolicy(raw_retention=timedelta(days=30), transient_retention=timedelta(days=1))
    return Writer(log, policy, clock=lambda: NOON)


def _caller(tenant: Tenant, role: str) -> Caller:
    if role == "admin":
        return authenticate(tenant.runtime.log, tenant.admin.token)
    return authenticate(tenant.runtime.log, tenant.token(role))


def _write(runtime: Runtime, caller: Caller, spec: WriteSpec) -> dict[str, Any]:
    return _writer(runtime.log).write(caller, [spec], batch=False).body


def _memory(client: TestClient, tenant: Tenant, **fields: Any) -> str:
    """Write a memory; return its id."""
    return str(remember(client, tenant.headers("writer"), **fields)["id"])


def _notes(client: TestClient, tenant: Tenant, n: int) -> list[str]:
    """Write ``n`` notes; return their ids."""
    return [
        _memory(client, tenant, type="note", content=f"Idea {i}: try option {i}.") for i in range(n)
    ]


def _propose_archive(runtime: Runtime, caller: Caller, memory_id: str) -> UUID:
    spec = ProposeSpec(
        memory_id=UUID(memory_id),
        verdict="archive",
        related_memory_id=None,
        probability=0.99,
        distribution=None,
        model="operator:test",
        run_id=uuid4(),
        dismissed=False,
    )
    return UUID(_write(runtime, caller, spec)["id"])


def _apply(
    proposal_id: UUID, guard: ProposalSettings = THREE, *, confirm: bool = False
) -> ProposalDecisionSpec:
    return ProposalDecisionSpec(proposal_id, "apply", None, confirm_bulk=confirm, settings=guard)


def _archived(client: TestClient, tenant: Tenant, ids: list[str]) -> list[str]:
    """Return which of ``ids`` are archived (forgotten, or superseded), as reads show."""
    drain_until_caught_up(tenant.runtime)
    found = []
    for memory_id in ids:
        response = client.get(f"/v1/memories/{memory_id}?wait=5", headers=tenant.headers())
        assert response.status_code == 200, response.text
        if response.json()["belief"]["labels"]["archived"] is not None:
            found.append(memory_id)
    return found


def _race(actions: list[Callable[[], Any]]) -> list[BaseException | None]:
    """Run ``actions`` at once on real threads; return what each raised (None: nothing)."""
    barrier = threading.Barrier(len(actions))
    outcomes: list[BaseException | None] = [None] * len(actions)

    def run(index: int) -> None:
        barrier.wait()
        try:
            actions[index]()
        except BaseException as e:  # reported to the test, which asserts on each
            outcomes[index] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_eight_concurrent_applies_archive_exactly_the_days_allowance(
    client: TestClient, runtime: Runtime, tenant: Tenant, test_database: Any
) -> None:
    # Given eight archive proposals and a guard that allows three memories a day
    writer = _caller(tenant, "writer")
    notes = _notes(client, tenant, 8)
    proposals = [_propose_archive(runtime, writer, m) for m in notes]
    # Each applier has a connection of its own: no transaction of this process is shared.
    logs = [
        EventLog(
            env=runtime.database.event_store_env(
                DatabaseSettings(db_pool_size=1, db_max_overflow=0)
            ),
            writers=table_writers(),
        )
        for _ in proposals
    ]
    try:
        # When eight people apply them at once
        outcomes = _race(
            [
                partial(_writer(log).write, writer, [_apply(p)], batch=False)
                for log, p in zip(logs, proposals, strict=True)
            ]
        )
    finally:
        for log in logs:
            log.close()

    # Then exactly three memories are archived, and the five others refused by the guard
    # (answered over HTTP as 409 with its problem type)
    refused = [o for o in outcomes if o is not None]
    assert [type(o).__name__ for o in refused] == ["CollapseGuardError"] * 5, refused
    assert {problem_of(o)[:2] for o in refused if isinstance(o, PalimpsestError)} == {
        ("collapse-guard", 409)
    }
    assert len(_archived(client, tenant, notes)) == 3


def test_a_merge_spends_the_allowance_by_the_memories_it_archives(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a merge of three memories, and an archive proposal about a fourth
    writer = _caller(tenant, "writer")
    sources = [_memory(client, tenant, type="fact", content="Deploys on Fridays") for _ in "abc"]
    other = _notes(client, tenant, 1)[0]
    loaded = aggregates_of(runtime.log, tenant.id, [UUID(s) for s in sources])
    seen = tuple(
        (UUID(s), m.current_version.version_id)
        for s in sources
        if isinstance(m := loaded[UUID(s)], Memory)
    )
    merge = UUID(
        _write(
            runtime,
            writer,
            ProposeMergeSpec(seen, "Deploys on Fridays", "extractive", uuid4(), similarity=1.0),
        )["id"]
    )
    archive = _propose_archive(runtime, writer, other)

    # When a person applies the merge under a guard of two memories a day, then of three
    with pytest.raises(CollapseGuardError):
        _write(
            runtime, writer, _apply(merge, ProposalSettings(collapse_share=0.0, collapse_minimum=2))
        )
    assert _archived(client, tenant, sources) == []
    _write(runtime, writer, _apply(merge))

    # Then the merge archived three memories: the day's three are spent
    assert _archived(client, tenant, sources) == sources
    with pytest.raises(CollapseGuardError):
        _write(runtime, writer, _apply(archive))
    assert _archived(client, tenant, [other]) == []


def test_the_cycles_archives_and_merges_spend_the_allowance_proposals_spend(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given five notes the cycle would archive, two near-duplicate facts it keeps but
    # consolidation would merge at once, and an archive proposal about a decision
    notes = _notes(client, tenant, 5)
    twin = {"type": "fact", "content": "The VPN runs WireGuard", "importance": 1}
    twins = [_memory(client, tenant, **twin), _memory(client, tenant, **twin)]
    decision = _memory(client, tenant, type="decision", content="Use Postgres", importance=1)
    set_policy(
        client,
        tenant,
        prune_below=0.3,
        auto_archive_decayed=True,
        auto_apply_extractive_merges=True,
    )
    proposal = _propose_archive(runtime, _caller(tenant, "writer"), decision)
    index_until_caught_up(runtime, tenant.id)

    # When the cycle runs under a guard of three memories a day
    report = run_cycle(
        runtime.log,
        _writer(runtime.log),
        tenant.id,
        now=datetime.now(UTC) + timedelta(days=400),
        model_id=runtime.embedder.model_id,
        guard=THREE,
    )

    # Then it archives three notes and proposes the rest; the merge is proposed, not
    # applied; and the day is spent for a person applying a proposal too
    assert len(report.archived) == 3 and report.held_back == 2
    assert set(report.archived) <= set(notes)
    assert report.consolidation is not None
    merges = report.consolidation
    assert (merges["merged"], merges["held_back"], merges["proposed"]) == (0, 1, 1)
    assert _archived(client, tenant, twins) == []
    with pytest.raises(CollapseGuardError):
        _write(runtime, _caller(tenant, "writer"), _apply(proposal))
    assert _archived(client, tenant, [decision]) == []


def test_an_admins_confirmation_passes_the_guard_and_counts_against_the_day(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given a guard of one memory a day, two archive proposals, and three old notes
    writer = _caller(tenant, "writer")
    notes = _notes(client, tenant, 5)
    first, second = (_propose_archive(runtime, writer, m) for m in notes[:2])
    one = ProposalSettings(collapse_share=0.0, collapse_minimum=1)
    set_policy(client, tenant, prune_below=0.3, auto_archive_decayed=True)
    drain_until_caught_up(runtime)

    # When a writer applies both, then a writer and an admin confirm the second
    _write(runtime, writer, _apply(first, one))
    with pytest.raises(CollapseGuardError):
        _write(runtime, writer, _apply(second, one))
    with pytest.raises(PermissionDeniedError):
        _write(runtime, writer, _apply(second, one, confirm=True))
    _write(runtime, _caller(tenant, "admin"), _apply(second, one, confirm=True))
    drain_until_caught_up(runtime)
    report = run_cycle(
        runtime.log,
        _writer(runtime.log),
        tenant.id,
        now=datetime.now(UTC) + timedelta(days=400),
        model_id=runtime.embedder.model_id,
        guard=one,
    )

    # Then the confirmed archival went through and was counted: the cycle that follows
    # on the same day archives nothing itself, and proposes its prunes
    assert _archived(client, tenant, notes[:2]) == notes[:2]
    assert report.archived == [] and report.held_back == 3 and len(report.proposals) == 3


class _SpendingFirst(Writer):
    """The write path, with a person applying an archive proposal just before the
    cycle's write: after the cycle read what the day's allowance still held."""

    def __init__(self, runtime: Runtime, tenant: Tenant, proposal: UUID) -> None:
        super().__init__(runtime.log, _writer(runtime.log).policy, clock=lambda: NOON)
        self.apply = partial(_write, runtime, _caller(tenant, "writer"), _apply(proposal))
        self.applied = False

    def write(self, *args: Any, **kwargs: Any) -> Any:
        if not self.applied:
            self.applied = True
            self.apply()
        return super().write(*args, **kwargs)


def test_a_cycle_whose_allowance_was_spent_meanwhile_archives_only_what_is_left(
    client: TestClient, runtime: Runtime, tenant: Tenant
) -> None:
    # Given three notes the cycle would archive, a guard of three memories a day, and
    # a person who applies an archive proposal while the cycle runs
    notes = _notes(client, tenant, 3)
    decision = _memory(client, tenant, type="decision", content="Use Postgres", importance=1)
    proposal = _propose_archive(runtime, _caller(tenant, "writer"), decision)
    set_policy(client, tenant, prune_below=0.3, auto_archive_decayed=True)
    drain_until_caught_up(runtime)

    # When the cycle, which found three memories left, writes
    report = run_cycle(
        runtime.log,
        _SpendingFirst(runtime, tenant, proposal),
        tenant.id,
        now=datetime.now(UTC) + timedelta(days=400),
        model_id=runtime.embedder.model_id,
        guard=THREE,
    )

    # Then its write was refused and planned again: it archives the two left
    assert _archived(client, tenant, [decision]) == [decision]
    assert len(report.archived) == 2 and report.held_back == 1 and len(report.proposals) == 1
    assert sorted(_archived(client, tenant, notes)) == sorted(report.archived)
