"""The watermark invariant, under any interleaving of writes, drains and reads.

After every step: a read that answers ``current`` returns exactly the
projection function applied to the log as it stood when the read began, and
every read that cannot guarantee that answers ``pending``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

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

from domain.belief import project_belief
from domain.errors import ConflictError, InvalidInputError
from projections.commands.tokens import authenticate, create_tenant
from projections.commands.writer import (
    CapturePolicy,
    EdgeSpec,
    EvidenceSpec,
    MemorySpec,
    ObservationSpec,
    RetractSpec,
    VersionSpec,
    WithdrawSpec,
    Writer,
)
from projections.drains.revision import _claim, drain_revisions
from projections.runtime import Runtime
from projections.store.schema import EVENTS_TABLE
from projections.views.belief_facts import belief_document, memory_facts
from projections.views.current_beliefs import current_belief

TYPES = ("fact", "preference", "decision")
MODELS = ("judge-1.4", "judge-2.0")


class WatermarkMachine(RuleBasedStateMachine):
    """Writes, drains (partial, killed, concurrent) and reads against real PostgreSQL."""

    runtime: Runtime  # set by the test below

    memories = Bundle("memories")
    observations = Bundle("observations")

    @initialize()
    def start(self) -> None:
        issued = create_tenant(self.runtime.log, "watermark-machine")
        self.caller = authenticate(self.runtime.log, issued.token)
        self.writer = Writer(
            self.runtime.log,
            CapturePolicy(timedelta(days=30), timedelta(hours=1)),
            lambda: datetime.now(UTC),
        )
        self.known: list[UUID] = []

    def _write(self, spec: Any) -> dict[str, Any] | None:
        try:
            return self.writer.write(self.caller, [spec], batch=False).body
        except (ConflictError, InvalidInputError):
            return None  # a refused write (a duplicate edge) changes nothing

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
        if source != other:
            self._write(EdgeSpec(source, kind, other))

    @rule(observation=observations)
    def retract(self, observation: UUID) -> None:
        self._write(RetractSpec(observation, "retracted by the machine"))

    @rule(model=st.sampled_from(MODELS))
    def withdraw_model(self, model: str) -> None:
        self._write(WithdrawSpec(None, model, None))

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
        for memory in getattr(self, "known", []):
            self._check(memory)

    def _check(self, memory: UUID) -> None:
        head = self._log_head()
        answer = current_belief(
            self.runtime.log, self.caller.tenant_id, memory, now=lambda: datetime.now(UTC)
        ).model_dump(exclude_none=True)
        # Steps run one at a time, so the log at the reader's start is the log now.
        assert self._log_head() == head
        if answer["status"] == "current":
            facts = memory_facts(self.runtime.log, self.caller.tenant_id, memory)
            assert facts is not None
            assert answer["belief"] == belief_document(project_belief(facts))
            assert answer["revision"]["published"] >= answer["revision"]["requested"]
        else:
            assert answer["status"] == "pending"
            assert "belief" not in answer
            assert answer["revision"]["published"] < answer["revision"]["requested"]

    def _log_head(self) -> int:
        schema = self.runtime.database.schema
        with self.runtime.database.owner_connection() as conn:
            row = conn.execute(
                f'SELECT max(notification_id) FROM "{schema}"."{EVENTS_TABLE}"'
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0


def test_current_reads_always_equal_the_projection_of_the_log(runtime: Runtime) -> None:
    WatermarkMachine.runtime = runtime
    machine = WatermarkMachine.TestCase
    machine.settings = settings(
        max_examples=15,
        stateful_step_count=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine().runTest()
