"""The recorded forgetting-pass scenario: real statements as memories, and the steps run on them.

Shared by ``test_forgetting_pass_recorded.py`` (which replays the judge's
answers) and ``tests/benchmarks/record_judge.py --pass`` (which records them
from a live SmolLM2): both build the same store through the same API and run
the same steps, so the pass sends byte-identical requests and every one has a
recording.

The statements are real LongMemEval user turns of the knowledge-updates dev
split (``supersedes`` pairs and the newer turn of an ``unrelated`` pair, MIT
licence), each captured at its real date. The recorder copies them from the
dataset into ``tests/fixtures/judge/pass/scenario.jsonl`` (:data:`PICKS` says
which), so the tests never need the dataset.

Every step is deterministic given the judge's answers: ``now`` is fixed, the
thresholds are fixed (:data:`THRESHOLDS`; they decide which verdicts open a
proposal, and an open proposal decides whether a later verdict is recorded,
which decides what a later pass sends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

from fastapi.testclient import TestClient

from palimpsest.projections.commands._policy import CapturePolicy
from palimpsest.projections.commands._spec import Ref
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.tokens import authenticate
from palimpsest.projections.commands.writer import (
    EvidenceSpec,
    ObservationSpec,
    VersionSpec,
    Writer,
)
from palimpsest.projections.drains.forgetting_pass import PassReport, run_pass
from palimpsest.projections.judgment.judge import Judge
from palimpsest.projections.recall.pass_candidates import PassSettings
from palimpsest.projections.runtime import Runtime
from tests.conftest import index_until_caught_up

__all__ = [
    "LATER",
    "NOW",
    "PASS_FIXTURES",
    "PICKS",
    "POLICY",
    "Pick",
    "REVISED_AT",
    "REVISION",
    "SCENARIO_FILE",
    "Scenario",
    "StoredMemory",
    "THRESHOLDS",
    "build_store",
    "load_scenario",
    "opt_in",
    "pass_at",
    "revise",
]

PASS_FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "judge" / "pass"
"""The recordings of the scenario's judge calls, and the scenario itself."""
SCENARIO_FILE = PASS_FIXTURES / "scenario.jsonl"
"""One memory a line, then the revision (not ``.json``: recordings are ``*.json``)."""

NOW = datetime(2026, 10, 26, 4, 30, tzinfo=UTC)
"""The first and second passes' time: every statement (2023) is stale then."""
REVISED_AT = datetime(2099, 1, 5, 9, 0, tzinfo=UTC)
"""When the revision's evidence is captured. A verdict stays final until a memory's
time passes the verdict's creation, which is the wall clock's; so the revision's
time must be later than any day this test runs on, and fixed for the recordings."""
LATER = datetime(2099, 2, 15, 4, 30, tzinfo=UTC)
"""The third pass's time, once the revision is stale too."""

THRESHOLDS = {
    "PALIMPSEST_THRESHOLD_ARCHIVE": "0.45",
    "PALIMPSEST_THRESHOLD_SUPERSEDE": "0.85",
    "PALIMPSEST_THRESHOLD_CONFLICT": "0.9",
}
"""The thresholds the scenario runs with, set through the environment. Chosen after
reading SmolLM2's recorded answers so that each action has a verdict at or above its
threshold (proposed) and one below it (dismissed)."""

POLICY = {"enabled": True, "daily_calls": 50, "daily_tokens": 500_000}
"""The tenant's judgment policy: opted in, a budget the scenario never reaches."""


@dataclass(frozen=True)
class Pick:
    """One statement of the dev split made a memory: which row, which side, where."""

    key: str
    source: str
    label: str
    side: str
    memory_type: str
    scope: str


PICKS = (
    Pick("run-old", "longmemeval:6a1eabeb", "supersedes", "older", "fact", "user"),
    Pick("run-new", "longmemeval:6a1eabeb", "supersedes", "newer", "fact", "user"),
    Pick("followers-old", "longmemeval:1cea1afa", "supersedes", "older", "fact", "user"),
    Pick("followers-new", "longmemeval:1cea1afa", "supersedes", "newer", "fact", "user"),
    Pick("volleyball", "longmemeval:c7dc5443", "supersedes", "older", "fact", "user"),
    Pick("coding", "longmemeval:6a1eabeb|cc5ded98", "unrelated", "newer", "fact", "work"),
)
"""The memories, in the order they are written."""

REVISION = Pick("volleyball", "longmemeval:c7dc5443", "supersedes", "newer", "fact", "user")
"""The new version of a judged memory: the volleyball record, updated by the newer turn."""


@dataclass(frozen=True)
class StoredMemory:
    """A scenario memory as the store holds it."""

    key: str
    content: str
    captured_at: datetime
    memory_type: str
    scope: str


@dataclass(frozen=True)
class Scenario:
    """The memories, and the revision of one of them."""

    memories: tuple[StoredMemory, ...]
    revision: StoredMemory
    """Its key is the memory revised; its time is :data:`REVISED_AT`."""


def load_scenario(path: Path = SCENARIO_FILE) -> Scenario:
    """Return the scenario the recordings were made for."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]

    def stored(data: dict[str, Any]) -> StoredMemory:
        return StoredMemory(
            data["key"],
            data["content"],
            datetime.fromisoformat(data["captured_at"]),
            data["type"],
            data["scope"],
        )

    memories = tuple(stored(line) for line in lines if not line.get("revision"))
    (revision,) = [stored(line) for line in lines if line.get("revision")]
    return Scenario(memories, revision)


def build_store(
    client: TestClient, headers: dict[str, str], runtime: Runtime, tenant_id: UUID, s: Scenario
) -> dict[str, UUID]:
    """Write each memory through the API, citing an observation captured at its date, and
    index them; return each memory's id by key."""
    ids: dict[str, UUID] = {}
    for memory in s.memories:
        observed = client.post(
            "/v1/observations",
            json={"content": memory.content, "captured_at": memory.captured_at.isoformat()},
            headers=headers,
        )
        assert observed.status_code == 201, observed.text
        evidence = [
            {"observation_id": observed.json()["id"], "start": 0, "end": len(memory.content)}
        ]
        made = client.post(
            "/v1/memories",
            json={
                "type": memory.memory_type,
                "scope": memory.scope,
                "content": memory.content,
                "evidence": evidence,
            },
            headers=headers,
        )
        assert made.status_code == 201, made.text
        ids[memory.key] = UUID(made.json()["id"])
    index_until_caught_up(runtime, tenant_id)
    return ids


def opt_in(client: TestClient, headers: dict[str, str]) -> None:
    """Opt the tenant in (``PUT /v1/tenant/judgment``), with :data:`POLICY`'s budget."""
    response = client.put("/v1/tenant/judgment", json=POLICY, headers=headers)
    assert response.status_code == 200, response.text


def _writer(runtime: Runtime, clock: datetime) -> Writer:
    return Writer(
        runtime.log, CapturePolicy(timedelta(days=30), timedelta(hours=24)), lambda: clock
    )


def pass_at(
    runtime: Runtime, tenant_id: UUID, judge: Judge, proposals: ProposalSettings, now: datetime
) -> PassReport:
    """Run the forgetting pass over the tenant at ``now``, default candidate settings but
    no pair floor: the recordings were made before the floor (0.25), and its pairs
    below it would be sent no more, so the requests would no longer match them."""
    return run_pass(
        runtime.log,
        _writer(runtime, now),
        tenant_id,
        judge,
        now=now,
        candidates=PassSettings(pair_floor=None),
        proposals=proposals,
        model_id=runtime.embedder.model_id,
    )


def revise(runtime: Runtime, admin_token: str, memory_id: UUID, revision: StoredMemory) -> UUID:
    """Record the revision as a new version of the memory, citing an observation captured
    at :data:`REVISED_AT` (written at that clock); index it; return the version's id."""
    text = revision.content
    specs = [
        ObservationSpec(text, "text/plain", None, revision.captured_at, False),
        VersionSpec(memory_id, text, (EvidenceSpec(Ref(0), 0, len(text)),), None, 1.0),
    ]
    caller = authenticate(runtime.log, admin_token)
    written = _writer(runtime, revision.captured_at).write(caller, specs, batch=True)
    index_until_caught_up(runtime, caller.tenant_id)
    return UUID(written.body["results"][1]["version_id"])
