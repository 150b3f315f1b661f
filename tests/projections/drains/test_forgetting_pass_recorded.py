"""The forgetting pass end to end, judged by a real model's recorded answers.

A tenant holds real LongMemEval statements (two ``supersedes`` pairs, the
older side of a third, and an unrelated turn in another scope), each
captured at its real 2023 date, so all are stale at the fixed ``NOW``
(``pass_scenario.py``). It opts in through the API, and the pass runs with
:class:`~palimpsest.projections.judgment._recorded.RecordedJudge`: the ordinary client
over loopback HTTP, answered by what SmolLM2-135M on ``llama_cpp.server``
answered to these very requests (``tests/benchmarks/record_judge.py --pass``
made ``tests/fixtures/judge/pass/``; a request nobody recorded is refused, so
the pass sending anything else fails these tests).

What the model answered is read here from the recordings without the
client (each answer letter, and the distribution over the four letters at
its token), and the proposals listed by the API are checked against it.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import pytest
from fastapi.testclient import TestClient

from palimpsest.domain.judge_state import JudgeItem, PairItem, neighbour_ref
from palimpsest.domain.verdicts import ACTIONS, LETTERS
from palimpsest.projections.commands.proposals import ProposalSettings
from palimpsest.projections.commands.tokens import create_tenant
from palimpsest.projections.drains.forgetting_pass import PassReport, judge_items
from palimpsest.projections.drains.judge_budget import usage_on
from palimpsest.projections.judgment._recorded import RecordedJudge
from palimpsest.projections.recall.pass_candidates import PassSettings, select_candidates
from palimpsest.projections.runtime import Runtime
from tests.benchmarks.llama_server import MODEL_ALIAS
from tests.conftest import Tenant, drain_until_caught_up, index_until_caught_up
from tests.projections.drains.pass_scenario import (
    LATER,
    NOW,
    PASS_FIXTURES,
    THRESHOLDS,
    build_store,
    load_scenario,
    opt_in,
    pass_at,
    revise,
)

_ACTION: dict[str, str] = dict(zip(LETTERS, ACTIONS, strict=True))


@dataclass(frozen=True)
class Answer:
    """One item's answer in a recording: the action, the neighbour it names, and the
    model's distribution over the four choices at its letter."""

    action: str
    named: str | None
    distribution: dict[str, float]


@dataclass(frozen=True)
class Recorded:
    """What the model server answered to one pass's requests."""

    answers: dict[str, Answer]
    calls: int
    prompt_tokens: int
    completion_tokens: int


def _recorded(name: str) -> Recorded:
    """Read a pass's recordings (``pass1-*.json`` …) without the client."""
    answers: dict[str, Answer] = {}
    paths = sorted(PASS_FIXTURES.glob(f"{name}-*.json"))
    prompt = completion = 0
    for path in paths:
        body = json.loads(path.read_text(encoding="utf-8"))["response"]["body"]
        prompt += body["usage"]["prompt_tokens"]
        completion += body["usage"]["completion_tokens"]
        choice = body["choices"][0]
        starts: dict[int, dict[str, Any]] = {}
        spelled = ""
        for token in choice["logprobs"]["content"]:
            starts[len(spelled)] = token
            spelled += token["token"]
        assert spelled == choice["message"]["content"]
        lines = spelled.split("\n")
        offset = 0
        for line, answer in itertools.pairwise(lines):
            offset += len(line) + 1
            if line.endswith(":") and answer[:1] in LETTERS:
                top = starts[offset]["top_logprobs"]
                weights: dict[str, float] = {}
                for alt in top:
                    if alt["token"].strip() in LETTERS:
                        letter = alt["token"].strip()
                        weights[letter] = weights.get(letter, 0.0) + math.exp(alt["logprob"])
                floor = math.exp(min(alt["logprob"] for alt in top))
                total = sum(weights.get(letter, floor) for letter in LETTERS)
                distribution = {_ACTION[x]: weights.get(x, floor) / total for x in LETTERS}
                named = answer[2:] or None
                answers[line[:-1]] = Answer(_ACTION[answer[0]], named, distribution)
    return Recorded(answers, len(paths), prompt, completion)


@dataclass
class Run:
    """The scenario as it ran: what each pass was shown and did, and what it left."""

    tenant: Tenant
    ids: dict[str, UUID]
    versions: dict[int, dict[UUID, UUID]]
    """Each memory's current version when each pass ran."""
    items: dict[int, list[JudgeItem]]
    reports: dict[int, PassReport]
    proposals: dict[int, list[dict[str, Any]]]
    """The proposals each pass recorded (any status), as the API lists them."""
    served: dict[int, int]
    """Requests the recordings had answered by the end of each pass."""
    usage: dict[int, tuple[int, int]]
    """The tenant's (calls, tokens) on the pass's day, after it."""


def _listed(client: TestClient, tenant: Tenant, run_id: UUID) -> list[dict[str, Any]]:
    found = []
    for status in ("proposed", "dismissed", "applied", "rejected"):
        response = client.get(
            "/v1/proposals", params={"status": status, "limit": 100}, headers=tenant.headers()
        )
        assert response.status_code == 200, response.text
        found += [p for p in response.json()["items"] if p["run_id"] == str(run_id)]
    return found


def _versions(client: TestClient, tenant: Tenant, ids: dict[str, UUID]) -> dict[UUID, UUID]:
    versions = {}
    for memory_id in ids.values():
        response = client.get(f"/v1/memories/{memory_id}?wait=5", headers=tenant.headers())
        assert response.status_code == 200, response.text
        versions[memory_id] = UUID(response.json()["belief"]["current_version_id"])
    return versions


@pytest.fixture(scope="module")
def run(client: TestClient, runtime: Runtime) -> Iterator[Run]:
    """Run the scenario once for the module: three passes and a revision."""
    tenant = Tenant(runtime, create_tenant(runtime.log, f"recorded-pass-{uuid4().hex[:8]}"))
    story = load_scenario()
    with pytest.MonkeyPatch.context() as env, RecordedJudge(PASS_FIXTURES) as judge:
        for name, value in THRESHOLDS.items():
            env.setenv(name, value)
        proposals = ProposalSettings()
        # Given the statements as memories, and the tenant opted in
        ids = build_store(client, tenant.headers(), runtime, tenant.id, story)
        opt_in(client, tenant.headers())
        result = Run(tenant, ids, {}, {}, {}, {}, {}, {})

        def one_pass(number: int, now: datetime) -> None:
            model_id = runtime.embedder.model_id
            found = select_candidates(
                runtime.log,
                tenant.id,
                now=now,
                settings=PassSettings(pair_floor=None),
                model_id=model_id,
            )
            result.items[number] = judge_items(runtime.log, tenant.id, found)
            result.versions[number] = _versions(client, tenant, ids)
            report = pass_at(runtime, tenant.id, judge, proposals, now)
            result.reports[number] = report
            result.proposals[number] = _listed(client, tenant, report.run_id)
            result.served[number] = len(judge.server.served)
            result.usage[number] = usage_on(runtime.log, tenant.id, now.date())

        # When the pass runs, then runs again at the same time
        one_pass(1, NOW)
        one_pass(2, NOW)
        # and once more after a judged memory got a new version
        revise(runtime, tenant.admin.token, ids[story.revision.key], story.revision)
        one_pass(3, LATER)
        yield result


Made = tuple[UUID, str, UUID | None, str]
"""A proposal as (memory, action, related memory, status)."""


def _expected(run: Run, number: int) -> list[tuple[Made, dict[str, float]]]:
    """The proposals the recorded answers should have become, in the pass's order, each
    with the distribution the model gave at its letter. A keep, and a verdict below its
    action's threshold, is dismissed; a proposal the memory already has open for the
    action is not recorded twice."""
    answers = _recorded(f"pass{number}").answers
    thresholds = {name.rsplit("_", 1)[1].lower(): float(t) for name, t in THRESHOLDS.items()}
    open_: set[tuple[UUID, str]] = set()
    expected = []
    for item in run.items[number]:
        answer = answers[item.ref]
        relates = answer.action in ("supersede", "conflict")
        if isinstance(item, PairItem):
            memory, related = item.older.memory_id, item.newer.memory_id if relates else None
        else:
            memory = item.memory.memory_id
            named = [
                n.memory_id
                for i, n in enumerate(item.newer)
                if neighbour_ref(item, i) == answer.named
            ]
            related = named[0] if relates else None
        probability = answer.distribution[answer.action]
        dismissed = answer.action == "keep" or probability < thresholds[answer.action]
        if not dismissed and (memory, answer.action) in open_:
            continue
        if not dismissed:
            open_.add((memory, answer.action))
        status = "dismissed" if dismissed else "proposed"
        expected.append(((memory, answer.action, related, status), answer.distribution))
    return expected


def _as_made(proposal: dict[str, Any]) -> Made:
    related = proposal["related"]
    return (
        UUID(proposal["memory"]["id"]),
        proposal["action"],
        None if related is None else UUID(related["id"]),
        proposal["status"],
    )


@pytest.mark.parametrize("number", [1, 3])
def test_each_recorded_verdict_becomes_a_proposal_at_its_threshold(run: Run, number: int) -> None:
    report = run.reports[number]
    made = run.proposals[number]
    assert report.stopped is None and report.failed == 0
    assert report.judged == len(run.items[number]) == report.items > 0
    expected = [key for key, _ in _expected(run, number)]
    assert sorted(map(_as_made, made), key=str) == sorted(expected, key=str)
    assert report.proposed == sum(p["status"] == "proposed" for p in made)
    assert report.dismissed == sum(p["status"] == "dismissed" for p in made)


def test_a_proposal_records_the_model_its_distribution_and_what_the_judge_saw(run: Run) -> None:
    for number in (1, 3):
        expected = _expected(run, number)
        for proposal in run.proposals[number]:
            assert proposal["model"] == MODEL_ALIAS
            distribution = proposal["distribution"]
            assert math.isclose(sum(distribution.values()), 1.0, rel_tol=1e-9)
            assert proposal["probability"] == distribution[proposal["action"]]
            # The model's own distribution, read from top_logprobs at the item's letter
            matches = [
                i
                for i, (key, read) in enumerate(expected)
                if key == _as_made(proposal)
                and set(read) == set(distribution)
                and all(math.isclose(read[a], distribution[a], rel_tol=1e-9) for a in ACTIONS)
            ]
            assert matches, f"no recorded answer gave {proposal['action']} {distribution}"
            expected.pop(matches[0])
            for side in ("memory", "related"):
                if proposal[side] is not None:
                    seen = UUID(proposal[side]["seen_version_id"])
                    assert seen == run.versions[number][UUID(proposal[side]["id"])]
        assert expected == []


def test_the_recorded_answers_include_a_proposal_and_a_dismissal_of_each_action(run: Run) -> None:
    made = run.proposals[1] + run.proposals[3]
    for action in ("archive", "supersede", "conflict"):
        statuses = {p["status"] for p in made if p["action"] == action}
        assert statuses == {"proposed", "dismissed"}, action
    assert {p["status"] for p in made if p["action"] == "keep"} == {"dismissed"}


def test_a_second_pass_at_the_same_time_judges_nothing_and_calls_no_judge(run: Run) -> None:
    second = run.reports[2]
    assert (second.singles, second.pairs, second.items, second.calls) == (0, 0, 0, 0)
    assert second.stopped is None
    assert run.served[2] == run.served[1]  # the judge got no request
    assert run.proposals[2] == []
    assert run.usage[2] == run.usage[1]


def test_a_new_version_makes_the_pass_judge_the_memory_again(run: Run) -> None:
    revised = run.ids["volleyball"]
    third = run.proposals[3]
    about = [
        p
        for p in third
        if revised in {UUID(p["memory"]["id"]), UUID((p["related"] or p["memory"])["id"])}
    ]
    assert about, "the revised memory was not judged again"
    assert all(
        UUID(side["seen_version_id"]) == run.versions[3][revised] != run.versions[1][revised]
        for p in about
        for side in (p["memory"], p["related"])
        if side is not None and UUID(side["id"]) == revised
    )
    # A memory of another scope, whose freshness did not move, is not asked about again
    other = run.ids["coding"]
    assert any(UUID(p["memory"]["id"]) == other for p in run.proposals[1])
    assert other not in {UUID(p["memory"]["id"]) for p in third}
    assert run.served[3] > run.served[2]


def test_the_budget_records_what_the_server_reported(run: Run) -> None:
    # Passes 1 and 3 fall on different days, each with its own budget row
    for number in (1, 3):
        recorded = _recorded(f"pass{number}")
        report = run.reports[number]
        assert (report.calls, report.prompt_tokens, report.completion_tokens) == (
            recorded.calls,
            recorded.prompt_tokens,
            recorded.completion_tokens,
        )
        assert run.usage[number] == (
            recorded.calls,
            recorded.prompt_tokens + recorded.completion_tokens,
        )


def test_applying_a_proposed_archive_forgets_the_memory(
    run: Run, client: TestClient, runtime: Runtime
) -> None:
    headers = run.tenant.headers()
    [archive] = [
        p for p in run.proposals[3] if p["action"] == "archive" and p["status"] == "proposed"
    ]
    memory_id = archive["memory"]["id"]
    applied = client.post(
        f"/v1/proposals/{archive['id']}/apply",
        json={"reason": "the newer run says otherwise"},
        headers=run.tenant.headers("writer"),
    )
    assert applied.status_code == 201, applied.text
    assert {"op": "forget", "memory_id": memory_id} in applied.json()["accepted"]
    drain_until_caught_up(runtime)
    index_until_caught_up(runtime, run.tenant.id)
    memory = client.get(f"/v1/memories/{memory_id}?wait=5", headers=headers).json()
    archived = memory["belief"]["labels"]["archived"]
    assert archived["reason"] == f"proposal {archive['id']}: the newer run says otherwise"
    content = archive["memory"]["content"]
    recalled = client.post("/v1/recall", json={"query": content, "k": 10}, headers=headers)
    assert recalled.status_code == 200, recalled.text
    assert memory_id not in {i["id"] for i in recalled.json()["items"]}
    [done] = [
        p for p in _listed(client, run.tenant, run.reports[3].run_id) if p["id"] == archive["id"]
    ]
    assert done["status"] == "applied"
