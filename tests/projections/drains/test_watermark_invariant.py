"""The watermark invariant, under any interleaving of writes, drains and reads.

After every step: a read that answers ``current`` returns exactly the
projection function applied to the log as it stood when the read began, a
read that answers ``erased`` is of a memory the log erased, and every read
that cannot guarantee either answers ``pending``.

The machine writes everything that changes a belief: versions with and
without evidence, edges (supersession and conflicts among them),
retractions and withdrawals (which deactivate support), and erasures (of
observations, so versions formed only from them go, and of memories). The
test counts the paths its reads reached and requires each at least once, so
a change that made a path unreachable fails instead of passing untested.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from palimpsest.domain.belief import MemoryFacts, project_belief
from palimpsest.domain.errors import ConflictError, InvalidInputError, NotFoundError
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EdgeSpec,
    EraseSpec,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    RetractSpec,
    VersionSpec,
    WithdrawSpec,
    Writer,
)
from palimpsest.projections.drains.revision import _claim, drain_revisions
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.schema import EVENTS_TABLE
from palimpsest.projections.views.belief_facts import belief_document, memory_facts
from palimpsest.projections.views.current_beliefs import current_belief

TYPES = ("fact", "preference", "decision")
EXAMPLES = 10
STEPS = 30
"""Enough to reach every path in ``PATHS`` (derandomized: the same runs each time)."""
PATHS = (
    "write: supersedes edge",
    "write: erase an observation",
    "write: erase a memory",
    "read: pending",
    "read: current, with deactivated support",
    "read: current, superseded",
    "read: current, in a conflict",
    "read: current, with an erased version",
    "read: erased",
)
MODELS = ("judge-1.4", "judge-2.0")


class WatermarkMachine(RuleBasedStateMachine):
    """Writes, drains (partial, killed, concurrent) and reads against real PostgreSQL."""

    runtime: Runtime  # set by the test below
    reached: Counter[str]  # set by the test below: the paths reads reached, counted

    memories = Bundle("memories")
    observations = Bundle("observations")

    @initialize(target=memories)
    def start(self) -> Any:
        issued = create_tenant(self.runtime.log, f"watermark-machine-{uuid4().hex[:8]}")
        self.caller = authenticate(self.runtime.log, issued.token)
        self.writer = Writer(
            self.runtime.log,
            CapturePolicy(timedelta(days=30), timedelta(hours=1)),
            lambda: datetime.now(UTC),
        )
        self.known: list[UUID] = []
        return multiple(*self._every_kind_of_belief())

    def _every_kind_of_belief(self) -> list[UUID]:
        """Start from a store that holds every kind of belief: support deactivated,
        superseded, in conflict, with an erased version, erased (each read current,
        or erased, once). Hypothesis enables a random subset of the rules in each
        run (swarm testing), so a path left to chance is missed in some runs; the
        steps that follow then interleave everything with these memories."""
        supported, superseded, newer, one, other, revised, erased = (
            self._create("fact", cited=False) for _ in range(7)
        )
        observation = self._capture()
        evidence = (EvidenceSpec(observation, 0, 8),)
        self._write(VersionSpec(supported, "supported", evidence, MODELS[0], 1.0))
        self.retract(observation)
        self.link(newer, superseded, "supersedes")
        self.link(one, other, "conflicts_with")
        source = self._capture()
        evidence = (EvidenceSpec(source, 0, 8),)
        self._write(VersionSpec(revised, "from one source", evidence, MODELS[1], 1.0))
        self.erase_observation(source)
        self.erase_memory(erased)
        self.drain_everything()
        seeded = [supported, superseded, newer, one, other, revised, erased]
        for memory in seeded:
            self._check(memory)
        return seeded

    def _write(self, spec: Any) -> dict[str, Any] | None:
        try:
            return self.writer.write(self.caller, [spec], batch=False).body
        except (ConflictError, InvalidInputError, NotFoundError):
            # A refused write (a duplicate edge, a withdrawal of a model that never
            # contributed) changes nothing.
            return None

    def _capture(self) -> UUID:
        body = self._write(
            ObservationSpec("evidence text for the machine", "text/plain", None, None, False)
        )
        assert body is not None
        return UUID(body["id"])

    @rule(target=observations)
    def capture(self) -> UUID:
        return self._capture()

    @rule(target=memories, memory_type=st.sampled_from(TYPES), cited=st.booleans())
    def create(self, memory_type: str, cited: bool) -> UUID:
        return self._create(memory_type, cited)

    def _create(self, memory_type: str, cited: bool) -> UUID:
        evidence: tuple[EvidenceSpec, ...] = ()
        if cited:  # supported from the start, so that deactivations have something to hit
            evidence = (EvidenceSpec(self._capture(), 0, 8),)
        body = self._write(
            MemorySpec(memory_type, "user", None, None, "claim", evidence, MODELS[0], 1.0)
        )
        assert body is not None
        self.known.append(UUID(body["id"]))
        return UUID(body["id"])

    @rule(target=memories, observation=observations, start=st.integers(0, 10))
    def create_with_evidence(self, observation: UUID, start: int) -> Any:
        evidence = (EvidenceSpec(observation, start, start + 5),)
        body = self._write(
            MemorySpec("fact", "user", None, None, "cited", evidence, MODELS[1], 0.8)
        )
        if body is None:  # the observation was retracted: it cannot be cited again
            return multiple()
        self.known.append(UUID(body["id"]))
        return UUID(body["id"])

    @rule(memory=memories, observation=st.none() | observations)
    def revise(self, memory: UUID, observation: UUID | None) -> None:
        evidence = () if observation is None else (EvidenceSpec(observation, 0, 8),)
        self._write(VersionSpec(memory, "revised", evidence, MODELS[0], 1.0))

    @rule(
        source=memories,
        other=memories,
        kind=st.sampled_from(["supersedes", "conflicts_with", "extends"]),
    )
    def link(self, source: UUID, other: UUID, kind: str) -> None:
        if source != other and self._write(EdgeSpec(source, kind, other)) is not None:
            self.reached[f"write: {kind} edge"] += 1

    @rule(observation=observations)
    def retract(self, observation: UUID) -> None:
        self._write(RetractSpec(observation, "retracted by the machine"))

    @rule(model=st.sampled_from(MODELS))
    def withdraw_model(self, model: str) -> None:
        self._write(WithdrawSpec(None, model, None))

    @rule(observation=observations)
    def erase_observation(self, observation: UUID) -> None:
        # Versions formed only from it lose their content; others lose its support.
        if self._write(EraseSpec((observation,), (), "erased by the machine")) is not None:
            self.reached["write: erase an observation"] += 1

    @rule(memory=memories)
    def revise_then_erase_the_source(self, memory: UUID) -> None:
        # A version formed only from an observation that is then erased: the version
        # loses its content, and the memory keeps its other versions.
        observation = self._capture()
        evidence = (EvidenceSpec(observation, 0, 8),)
        self._write(VersionSpec(memory, "from one source", evidence, MODELS[1], 1.0))
        self.erase_observation(observation)
        self._settle_and_read(memory)

    @rule(target=memories, older=memories, kind=st.sampled_from(["supersedes", "conflicts_with"]))
    def replace_or_contradict(self, older: UUID, kind: str) -> UUID:
        # A new memory that supersedes (or conflicts with) an older one: the paths
        # of supersession and of open conflicts, reached on purpose.
        newer = self._create("fact", cited=False)
        self.link(newer, older, kind)
        self._settle_and_read(older)
        return newer

    @rule(memory=memories)
    def withdraw_support_and_read(self, memory: UUID) -> None:
        # A memory supported by an observation that is then retracted: its support
        # is deactivated; read once the drains have caught up.
        observation = self._capture()
        evidence = (EvidenceSpec(observation, 0, 8),)
        self._write(VersionSpec(memory, "supported once", evidence, MODELS[0], 1.0))
        self.retract(observation)
        self._settle_and_read(memory)

    def _settle_and_read(self, memory: UUID) -> None:
        """Drain until caught up, then read: the scenario rules end on a current read."""
        self.drain_everything()
        self._check(memory)

    @rule(memory=memories)
    def erase_memory(self, memory: UUID) -> None:
        if self._write(EraseSpec((), (memory,), "erased by the machine")) is not None:
            self.reached["write: erase a memory"] += 1

    @rule(limit=st.integers(1, 3))
    def drain_partially(self, limit: int) -> None:
        drain_revisions(self.runtime.log, limit=limit)

    @rule()
    def drain_everything(self) -> None:
        # A full sweep, so that corrections also land on memories that were current.
        self.leases_expire()
        while drain_revisions(self.runtime.log).claimed:
            pass

    @rule(limit=st.integers(1, 3))
    def drain_killed_mid_batch(self, limit: int) -> None:
        # Claims, then dies before publishing: the lease keeps others away until it expires.
        _claim(self.runtime.log, self.caller.tenant_id, limit, 3600.0)

    @rule()
    def leases_expire(self) -> None:
        schema = self.runtime.database.schema
        with self.runtime.database.owner_connection() as conn:
            conn.execute(
                f'UPDATE "{schema}".revisions SET claimed_until = now() - '
                "interval '1 s' WHERE tenant_id = %s AND claimed_until IS NOT NULL",
                (self.caller.tenant_id,),
            )

    @rule()
    def drain_concurrently(self) -> None:
        threads = [
            threading.Thread(target=drain_revisions, args=(self.runtime.log,), kwargs={"limit": 2})
            for _ in range(3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    @rule(memory=memories)
    def read(self, memory: UUID) -> None:
        self._check(memory)

    @invariant()
    def every_read_is_current_and_exact_or_pending(self) -> None:
        self.reached["steps"] += 1
        for memory in getattr(self, "known", []):
            self._check(memory)

    def _check(self, memory: UUID) -> None:
        head = self._log_head()
        answer = current_belief(
            self.runtime.log, self.caller.tenant_id, memory, now=lambda: datetime.now(UTC)
        ).model_dump(exclude_none=True)
        # Steps run one at a time, so the log at the reader's start is the log now.
        assert self._log_head() == head
        facts = memory_facts(self.runtime.log, self.caller.tenant_id, memory)
        assert facts is not None
        if answer["status"] == "current":
            assert answer["belief"] == belief_document(project_belief(facts))
            assert answer["revision"]["published"] >= answer["revision"]["requested"]
            self._count_current(facts)
        elif answer["status"] == "erased":
            assert facts.erased_by is not None
            assert answer["erasure"]["id"] == facts.erased_by
            assert "belief" not in answer
            self.reached["read: erased"] += 1
        else:
            assert answer["status"] == "pending"
            assert "belief" not in answer
            assert answer["revision"]["published"] < answer["revision"]["requested"]
            self.reached["read: pending"] += 1

    def _count_current(self, facts: MemoryFacts) -> None:
        """Count which paths of the projection a current read went through."""
        self.reached["read: current"] += 1
        if any(not c.active for c in facts.contributions):
            self.reached["read: current, with deactivated support"] += 1
        live_edges = [e for e in facts.edges if e.edge_id not in facts.retracted_edges]
        if any(e.kind == "supersedes" and e.target_id == facts.memory_id for e in live_edges):
            self.reached["read: current, superseded"] += 1
        if any(e.kind == "conflicts_with" for e in live_edges):
            self.reached["read: current, in a conflict"] += 1
        if facts.erased_versions:
            self.reached["read: current, with an erased version"] += 1

    def _log_head(self) -> int:
        schema = self.runtime.database.schema
        with self.runtime.database.owner_connection() as conn:
            row = conn.execute(
                f'SELECT max(notification_id) FROM "{schema}"."{EVENTS_TABLE}"'
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


@pytest.mark.slow
def test_current_reads_always_equal_the_projection_of_the_log(runtime: Runtime) -> None:
    WatermarkMachine.runtime = runtime
    WatermarkMachine.reached = Counter()
    machine = WatermarkMachine.TestCase
    machine.settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine().runTest()
    reached = WatermarkMachine.reached
    print("watermark machine reached:", dict(sorted(reached.items())))
    missed = [path for path in PATHS if reached[path] == 0]
    assert missed == [], f"paths the machine never reached: {missed}; reached {dict(reached)}"
