"""The OpenAI-compatible judge client over real loopback HTTP: requests, retries, batches.

The servers here answer with real recorded responses of SmolLM2 on
llama_cpp.server (tests/fixtures/judge/); the only synthesised answers are
failure statuses with empty bodies (429, 5xx, 400), which carry no model
output.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from palimpsest.domain.judge_state import SingleItem
from palimpsest.domain.verdicts import Verdict
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._prompt import SYSTEM_PROMPT, canonical_json
from palimpsest.projections.judgment._recorded import Recording, request_digest
from palimpsest.projections.judgment.judge import ItemFailure, JudgeUnavailableError
from tests.benchmarks.llama_server import MODEL_ALIAS
from tests.projections.judgment.batches import JudgeBatch
from tests.projections.judgment.conftest import ScriptedServer

Start = Callable[..., ScriptedServer]


def _client(server: ScriptedServer, batch: JudgeBatch, **options: Any) -> OpenAICompatibleJudge:
    return OpenAICompatibleJudge(
        server.url,
        MODEL_ALIAS,
        options.pop("api_key", None),
        10.0,
        options.pop("retries", 3),
        constraint=batch.constraint,
        logprobs=batch.logprobs,
        max_items=batch.max_items,
        **options,
    )


def test_a_429_then_a_500_are_retried_with_growing_waits_until_the_answer_comes(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    # Given an endpoint that is rate-limited, then failing, then answers
    batch = judge_batches["singles"]
    server = scripted_server(failures=[(429, {}), (500, {})])
    waits: list[float] = []
    judge = _client(server, batch, backoff_s=0.25, sleep=waits.append)
    # When the batch is judged
    results = judge.judge(batch.now, batch.items)
    # Then the same request went three times, waiting longer each time, and
    # every item got its recorded verdict
    assert len(server.seen) == 3
    assert len({seen.body for seen in server.seen}) == 1
    assert waits == [0.25, 0.5]
    assert [r.ref for r in results] == [item.ref for item in batch.items]
    assert all(isinstance(r, Verdict) for r in results)
    assert judge.usage.calls == 1 and judge.usage.prompt_tokens > 0


def test_retry_after_is_honoured_up_to_the_longest_wait(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    batch = judge_batches["singles"]
    server = scripted_server(failures=[(429, {"Retry-After": "7"}), (503, {"Retry-After": "600"})])
    waits: list[float] = []
    judge = _client(server, batch, backoff_s=0.25, max_backoff_s=30.0, sleep=waits.append)
    judge.judge(batch.now, batch.items)
    assert waits == [7.0, 30.0]


def test_an_endpoint_that_keeps_failing_fails_the_call_after_its_retries(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    batch = judge_batches["singles"]
    server = scripted_server(failures=[(503, {})] * 5)
    waits: list[float] = []
    judge = _client(server, batch, retries=2, backoff_s=1.0, sleep=waits.append)
    with pytest.raises(JudgeUnavailableError, match="503"):
        judge.judge(batch.now, batch.items)
    assert len(server.seen) == 3
    assert waits == [1.0, 2.0]


def test_a_refused_request_is_not_retried(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    batch = judge_batches["singles"]
    server = scripted_server(failures=[(400, {})])
    waits: list[float] = []
    with pytest.raises(JudgeUnavailableError, match="400"):
        _client(server, batch, sleep=waits.append).judge(batch.now, batch.items)
    assert len(server.seen) == 1 and waits == []


def test_an_endpoint_nobody_listens_on_is_retried_then_fails(
    judge_batches: dict[str, JudgeBatch],
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    batch = judge_batches["singles"]
    waits: list[float] = []
    judge = OpenAICompatibleJudge(
        f"http://127.0.0.1:{port}", MODEL_ALIAS, None, 5.0, 2, backoff_s=0.1, sleep=waits.append
    )
    with pytest.raises(JudgeUnavailableError, match="failed 3 times"):
        judge.judge(batch.now, batch.items)
    assert waits == [0.1, 0.2]


def test_the_request_asks_for_letters_their_logprobs_and_forces_the_format(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    batch = judge_batches["singles"]
    server = scripted_server()
    _client(server, batch, api_key="sk-test").judge(batch.now, batch.items)
    (seen,) = server.seen
    body = json.loads(seen.body)
    assert seen.headers["Authorization"] == "Bearer sk-test"
    assert seen.body.decode() == canonical_json(body)  # sent canonical, as recordings key it
    assert body["model"] == MODEL_ALIAS
    assert body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["temperature"] == 0
    assert body["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    state = json.loads(body["messages"][1]["content"].split("\n\n")[0])
    assert [item["ref"] for item in state["items"]] == ["s0", "s1", "s2", "s3"]
    # The grammar offers a neighbour's ref after C or D, and only A or B to a
    # single with nothing newer.
    grammar = body["grammar"]
    assert '"s0:\\n" ( [AB] | [CD] " " ( "s0n0" | "s0n1" ) ) "\\n"' in grammar
    assert '"s3:\\n" [AB] "\\n"' in grammar
    assert body["repeat_penalty"] == 1  # llama.cpp's 1.1 would skew later lines


def test_without_logprobs_or_grammar_the_request_leaves_those_fields_out(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    server = scripted_server()
    no_logprobs = judge_batches["no-logprobs"]
    _client(server, no_logprobs).judge(no_logprobs.now, no_logprobs.items)
    free = judge_batches["free-text"]
    _client(server, free).judge(free.now, free.items)
    first, second = (json.loads(seen.body) for seen in server.seen)
    assert "logprobs" not in first and "top_logprobs" not in first and "grammar" in first
    assert "grammar" not in second and second["logprobs"] is True


def test_a_batch_that_would_pass_48k_characters_is_sent_as_several_requests(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch], recordings: dict[str, Recording]
) -> None:
    # Given seven singles whose (uncut) topics make each about 20,000 characters
    # rendered, and one whose topic alone passes the limit
    batch = judge_batches["singles"]
    base = batch.items[3]
    assert isinstance(base, SingleItem)
    topics = ["t" * 20_000] * 6 + ["u" * 60_000]
    items = [
        replace(base, ref=f"big{i}", memory=replace(base.memory, topic=topic))
        for i, topic in enumerate(topics)
    ]
    # and an endpoint that answers every request with a real recorded answer
    # (for other refs, so every item here lacks its line)
    answer = next(r for r in recordings.values() if "singles" in r.path.name)
    server = scripted_server(answer_with=answer)
    # When they are judged
    results = _client(server, batch).judge(batch.now, items)
    # Then every request but the lone giant stays within 48,000 characters as
    # sent, prompt, grammar and escaping included, and the giant goes alone
    sizes = [len(seen.body.decode()) for seen in server.seen]
    assert len(sizes) == 4
    assert all(size <= 48_000 for size in sizes[:-1]) and sizes[-1] > 48_000
    sent = [[i["ref"] for i in _state(seen.body)["items"]] for seen in server.seen]
    assert sent == [["big0", "big1"], ["big2", "big3"], ["big4", "big5"], ["big6"]]
    # and each item still gets one result, in order
    assert [r.ref for r in results] == [item.ref for item in items]
    assert all(isinstance(r, ItemFailure) for r in results)


def test_a_request_nobody_recorded_fails_naming_its_digest(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    batch = judge_batches["singles"]
    base = batch.items[3]
    assert isinstance(base, SingleItem)
    changed = replace(base, memory=replace(base.memory, content="A statement nobody recorded"))
    items = [*batch.items[:3], changed]
    judge = _client(scripted_server(), batch)
    digest = request_digest(judge.body(batch.now, items))
    with pytest.raises(JudgeUnavailableError, match=digest):
        judge.judge(batch.now, items)


def _state(body: bytes) -> Any:
    return json.loads(json.loads(body)["messages"][1]["content"].split("\n\n")[0])
