"""Marking is exact enough: every belief a write changes, the write marked.

The recorder raises the requested revision of the memories a write records
events on and of both ends of a new edge, nothing transitive
(``_mark_for_revision``). For any sequence of writes, the projection of every
memory is computed from the log before and after each write; every memory
whose projection changed must have had its requested revision raised to the
write's position. Marking more would only cost republishing; marking less
would let a read serve a stale belief as current.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID, uuid4

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, multiple, rule

from palimpsest.domain.belief import project_belief
from palimpsest.domain.errors import ConflictError, InvalidInputError, NotFoundError
from palimpsest.projections.commands.tokens import authenticate, create_tenant
from palimpsest.projections.commands.writer import (
    CapturePolicy,
    EdgeSpec,
    EraseSpec,
    EvidenceSpec,
    LabelSpec,
    MemorySpec,
    ObservationSpec,
    RetractSpec,
    VersionSpec,
    WithdrawSpec,
    Writer,
    WriteSpec,
)
from palimpsest.projections.runtime import Runtime
from palimpsest.projections.store.sql import schema_sql
from palimpsest.projections.store.tenancy import tenant_transaction
from palimpsest.projections.views.belief_facts import belief_document, facts_of

MODELS = ("judge-a", "judge-b")


class MarkingMachine(RuleBasedStateMachine):
    """Random writes; after each, changed beliefs ⊆ marked memories."""

    runtime: ClassVar[Runtime]
    reached: ClassVar[Counter[str]] = Counter()

    memories = Bundle("memories")
    observations = Bundle("observations")

    @initialize()
    def start(self) -> None:
        issued = create_tenant(self.runtime.log, f"marking-{uuid4().hex[:12]}")
        self.caller = authenticate(self.runtime.log, issued.token)
        self.writer = Writer(
            self.runtime.log,
            CapturePolicy(timedelta(days=30), timedelta(hours=1)),
            lambda: datetime.now(UTC),
        )
        self.known: list[UUID] = []

    def _state(self) -> tuple[dict[UUID, int], dict[UUID, Any]]:
        log = self.runtime.log
        with tenant_transaction(log.datastore, self.caller.tenant_id, commit=False) as cur:
            cur.execute(
                schema_sql(
                    "SELECT memory_id, requested FROM {schema}.revisions", log.datastore.schema
                )
            )
            requested = {row["memory_id"]: row["requested"] for row in cur}
        facts = facts_of(log, self.caller.tenant_id, list(self.known))
        beliefs = {m: belief_document(project_belief(f)) for m, f in facts.items()}
        return requested, beliefs

    def _write(self, what: str, spec: WriteSpec) -> dict[str, Any] | None:
        before_requested, before = self._state()
        try:
            body = self.writer.write(self.caller, [spec], batch=False).body
        except (ConflictError, InvalidInputError, NotFoundError):
            self.reached[f"refused: {what}"] += 1
            return None
        after_requested, after = self._state()
        changed = {m for m in after if before.get(m) != after[m] and m in before}
        marked = {m for m, r in after_requested.items() if before_requested.get(m) != r}
        missed = changed - marked
        assert not missed, f"{what} changed {sorted(map(str, missed))} without marking them"
        self.reached[f"write: {what}"] += 1
        self.reached["beliefs changed by a write"] += len(changed)
        self.reached["memories marked by a write"] += len(marked)
        self.reached["marked but unchanged"] += len(marked - changed)
        return body

    def _new_memory(self, evidence: tuple[EvidenceSpec, ...]) -> UUID | None:
        body = self._write(
            "create", MemorySpec("fact", "user", None, None, "claim", evidence, MODELS[0], 1.0)
        )
        if body is None:
            return None
        memory = UUID(body["id"])
        self.known.append(memory)
        return memory

    @rule(target=observations)
    def capture(self) -> UUID:
        return self._capture()

    def _capture(self) -> UUID:
        body = self.writer.write(
            self.caller,
            [ObservationSpec("evidence text for marking", "text/plain", None, None, False)],
            batch=False,
        ).body
        return UUID(body["id"])

    @rule(target=memories, observation=st.none() | observations)
    def create(self, observation: UUID | None) -> Any:
        evidence = () if observation is None else (EvidenceSpec(observation, 0, 8),)
        memory = self._new_memory(evidence)
        return multiple() if memory is None else memory

    @rule(memory=memories, observation=st.none() | observations, model=st.sampled_from(MODELS))
    def revise(self, memory: UUID, observation: UUID | None, model: str) -> None:
        evidence = () if observation is None else (EvidenceSpec(observation, 0, 8),)
        self._write("revise", VersionSpec(memory, "revised", evidence, model, 1.0))

    @rule(
        source=memories,
        other=memories,
        kind=st.sampled_from(["supersedes", "conflicts_with", "extends"]),
    )
    def link(self, source: UUID, other: UUID, kind: str) -> None:
        if source != other:
            self._write(f"{kind} edge", EdgeSpec(source, kind, other))

    @rule(kind=st.sampled_from(["supersedes", "conflicts_with"]))
    def link_fresh(self, kind: str) -> None:
        # An edge between two fresh memories, reached on purpose: drawn from the
        # bundle, the two are often the same memory (skipped), so a run once
        # wrote a single conflicts_with edge.
        source, other = self._new_memory(()), self._new_memory(())
        if source is not None and other is not None:
            self.link(source, other, kind)

    @rule(observation=observations)
    def retract(self, observation: UUID) -> None:
        self._write("retract", RetractSpec(observation, "wrong"))

    @rule(target=memories)
    def cite_then_retract(self) -> Any:
        # The retraction of an observation a memory cites, reached on purpose: the rule
        # above needs an observation captured earlier, and a run now and then drew it
        # never (2026-12-05: 1 run in 10 at 9d3d66f, 3 in 13 at 06aad9f).
        observation = self._capture()
        memory = self._new_memory((EvidenceSpec(observation, 0, 8),))
        self.retract(observation)
        return multiple() if memory is None else memory

    @rule(model=st.sampled_from(MODELS))
    def withdraw(self, model: str) -> None:
        self._write("withdraw", WithdrawSpec(None, model, None))

    @rule(target=memories, model=st.sampled_from(MODELS))
    def support_then_withdraw(self, model: str) -> Any:
        # A model's support, then its withdrawal: reached on purpose (a model that
        # never contributed is refused with 404, which marks nothing).
        observation = self._capture()
        body = self._write(
            "create",
            MemorySpec(
                "fact", "user", None, None, "claim", (EvidenceSpec(observation, 0, 8),), model, 1.0
            ),
        )
        if body is None:
            return multiple()
        self.known.append(UUID(body["id"]))
        self.withdraw(model)
        return UUID(body["id"])

    @rule(memory=memories, op=st.sampled_from(["forget", "restore", "pin", "unpin"]))
    def label(self, memory: UUID, op: str) -> None:
        self._write(op, LabelSpec(memory, op, "by the machine"))  # type: ignore[arg-type]

    @rule(target=memories)
    def create_then_forget(self) -> Any:
        # A forget on a fresh memory, reached on purpose: drawn from the bundle, a
        # label op is a forget one time in four and often lands on an erased or
        # forgotten memory (refused), so a short run once never reached it.
        memory = self._new_memory(())
        if memory is None:
            return multiple()
        self._write("forget", LabelSpec(memory, "forget", "by the machine"))
        return memory

    @rule(observation=observations)
    def erase_observation(self, observation: UUID) -> None:
        self._write("erase an observation", EraseSpec((observation,), (), "asked"))

    @rule(target=memories)
    def cite_then_erase(self) -> Any:
        # The erasure of an observation a memory cites, reached on purpose: the rule
        # above needs an observation captured earlier, and a run once never drew it
        # (2026-12-04: 25 examples of 30 steps, every other path reached).
        observation = self._capture()
        memory = self._new_memory((EvidenceSpec(observation, 0, 8),))
        self.erase_observation(observation)
        return multiple() if memory is None else memory

    @rule(memory=memories)
    def erase_memory(self, memory: UUID) -> None:
        self._write("erase a memory", EraseSpec((), (memory,), "asked"))


@pytest.mark.slow
def test_every_changed_belief_was_marked(runtime: Runtime) -> None:
    MarkingMachine.runtime = runtime
    MarkingMachine.reached.clear()
    test = MarkingMachine.TestCase
    test.settings = settings(
        max_examples=25,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    test().runTest()
    reached = MarkingMachine.reached
    print("marking property reached:", dict(sorted(reached.items())))
    for path in (
        "write: supersedes edge",
        "write: conflicts_with edge",
        "write: retract",
        "write: withdraw",
        "write: forget",
        "write: erase an observation",
        "write: erase a memory",
    ):
        assert reached[path] > 0, f"the property never reached {path}: {dict(reached)}"
    assert reached["beliefs changed by a write"] > 0
