"""The recorded judge: SmolLM2's real answers, replayed over loopback HTTP to the real client.

tests/fixtures/judge/ holds what llama_cpp.server answered
(tests/benchmarks/record_judge.py made them); every test here runs the same
client code a deployment runs against a live endpoint.
"""

from __future__ import annotations

import itertools
import json
import math
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from palimpsest.domain.errors import ConfigurationError
from palimpsest.domain.judge_state import PairItem, SingleItem, verdict_memories
from palimpsest.domain.verdicts import ACTIONS, LETTERS, Action, Verdict
from palimpsest.projections.judgment._answers import NO_PROBABILITIES
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._recorded import (
    RecordedJudge,
    Recording,
    load_recordings,
    request_digest,
)
from palimpsest.projections.judgment.judge import ItemFailure, JudgeUnavailableError
from tests.benchmarks.llama_server import MODEL_ALIAS
from tests.projections.judgment.batches import FIXTURES, JudgeBatch
from tests.projections.judgment.conftest import ScriptedServer


def _recorded(batch: JudgeBatch) -> RecordedJudge:
    return RecordedJudge(
        FIXTURES, constraint=batch.constraint, logprobs=batch.logprobs, max_items=batch.max_items
    )


def _recordings_of(recordings: dict[str, Recording], batch: str) -> list[Recording]:
    return sorted(
        (r for r in recordings.values() if r.path.name.startswith(f"{batch}-")),
        key=lambda r: r.path.name,
    )


def _letter_distributions(recording: Recording) -> list[tuple[str, dict[Action, float]]]:
    """Each answer letter the model wrote, and its distribution, found without the client:
    a token that is a bare letter right after a newline, its top logprobs summed per
    letter, the smallest listed value for a letter not listed, renormalised."""
    tokens = recording.body["choices"][0]["logprobs"]["content"]
    found: list[tuple[str, dict[Action, float]]] = []
    for before, token in itertools.pairwise(tokens):
        if before["token"] != "\n" or token["token"] not in LETTERS:
            continue
        weights: dict[str, float] = {}
        for alt in token["top_logprobs"]:
            letter = alt["token"].strip()
            if letter in LETTERS:
                weights[letter] = weights.get(letter, 0.0) + math.exp(alt["logprob"])
        floor = math.exp(min(alt["logprob"] for alt in token["top_logprobs"]))
        raw = {letter: weights.get(letter, floor) for letter in LETTERS}
        total = sum(raw.values())
        found.append(
            (token["token"], {a: raw[x] / total for x, a in zip(LETTERS, ACTIONS, strict=True)})
        )
    return found


def test_each_verdict_carries_the_models_distribution_at_its_letter(
    judge_batches: dict[str, JudgeBatch], recordings: dict[str, Recording]
) -> None:
    # Given six pairs, judged four to a request
    batch = judge_batches["pairs"]
    with _recorded(batch) as judge:
        results = judge.judge(batch.now, batch.items)
        served = list(judge.server.served)
        usage = judge.usage
    # Then two requests went, and each pair got a verdict, in order
    answered = _recordings_of(recordings, "pairs")
    assert served == [r.digest for r in answered]
    assert [r.ref for r in results] == [item.ref for item in batch.items]
    expected = [found for r in answered for found in _letter_distributions(r)]
    assert len(expected) == len(results)
    for result, (letter, distribution) in zip(results, expected, strict=True):
        # whose action is the letter the model wrote, and whose probabilities
        # are those the server listed at that letter
        assert isinstance(result, Verdict)
        assert result.action == ACTIONS[LETTERS.index(letter)]
        assert result.distribution is not None and result.probability is not None
        for action in ACTIONS:
            assert result.distribution[action] == pytest.approx(distribution[action])
        assert result.probability == result.distribution[result.action]
        assert result.choice_mass is not None and 0 < result.choice_mass <= 1
        assert result.model == MODEL_ALIAS and result.note is None
    # and the usage is what the server reported for both requests
    assert usage.calls == 2
    assert usage.prompt_tokens == sum(r.body["usage"]["prompt_tokens"] for r in answered)
    assert usage.completion_tokens == sum(r.body["usage"]["completion_tokens"] for r in answered)


def test_a_singles_supersede_names_the_newer_memory_that_replaces_it(
    judge_batches: dict[str, JudgeBatch],
) -> None:
    batch = judge_batches["singles"]
    with _recorded(batch) as judge:
        results = judge.judge(batch.now, batch.items)
    assert all(isinstance(r, Verdict) for r in results)
    relating = [
        (item, r)
        for item, r in zip(batch.items, results, strict=True)
        if isinstance(r, Verdict) and r.action in ("supersede", "conflict")
    ]
    assert relating, "the recording holds a supersede or conflict for a single"
    for item, verdict in relating:
        assert isinstance(item, SingleItem) and verdict.related_ref is not None
        index = int(verdict.related_ref.removeprefix(f"{item.ref}n"))
        memory, related = verdict_memories(item, verdict)
        assert (memory, related) == (item.memory.memory_id, item.newer[index].memory_id)
    # A single with nothing newer can only be kept or archived.
    lone = [
        r
        for item, r in zip(batch.items, results, strict=True)
        if isinstance(item, SingleItem) and not item.newer
    ]
    assert lone and all(isinstance(r, Verdict) and r.action in ("keep", "archive") for r in lone)


def test_without_logprobs_a_verdict_has_no_probability_and_says_why(
    judge_batches: dict[str, JudgeBatch],
) -> None:
    batch = judge_batches["no-logprobs"]
    with _recorded(batch) as judge:
        results = judge.judge(batch.now, batch.items)
    assert len(results) == len(batch.items)
    for result in results:
        assert isinstance(result, Verdict)
        assert result.probability is None and result.distribution is None
        assert result.note == NO_PROBABILITIES


def test_an_answer_in_prose_fails_each_item_but_not_the_call(
    judge_batches: dict[str, JudgeBatch],
) -> None:
    # Given the model's real answer without the grammar: a sentence, no lines
    batch = judge_batches["free-text"]
    with _recorded(batch) as judge:
        results = judge.judge(batch.now, batch.items)
        usage = judge.usage
    # Then every item failed on its own, and the call returned
    assert [r.ref for r in results] == [item.ref for item in batch.items]
    assert all(isinstance(r, ItemFailure) for r in results)
    assert usage.calls == 1


def _answered_with(
    scripted_server: Callable[..., ScriptedServer], recording: Recording, batch: JudgeBatch
) -> OpenAICompatibleJudge:
    """A client whose endpoint answers every request with one recorded real answer."""
    server = scripted_server(answer_with=recording)
    return OpenAICompatibleJudge(
        server.url, MODEL_ALIAS, None, 10.0, 0, constraint=batch.constraint, max_items=12
    )


def test_an_answer_that_does_not_fit_its_item_fails_that_item_only(
    scripted_server: Callable[..., ScriptedServer],
    judge_batches: dict[str, JudgeBatch],
    recordings: dict[str, Recording],
) -> None:
    # Given the singles batch, but the one the model superseded now has no
    # newer memory, and the model's real answer naming one (``C s1n0``)
    batch = judge_batches["singles"]
    (recording,) = _recordings_of(recordings, "singles")
    with _recorded(batch) as judge:
        recorded = judge.judge(batch.now, batch.items)
    target = next(
        item
        for item, r in zip(batch.items, recorded, strict=True)
        if isinstance(r, Verdict) and r.related_ref is not None
    )
    assert isinstance(target, SingleItem)
    items = [replace(i, newer=()) if i is target else i for i in batch.items]
    # When that answer is read for these items
    results = _answered_with(scripted_server, recording, batch).judge(batch.now, items)
    # Then that item fails, and every other keeps the verdict it had
    for item, before, after in zip(items, recorded, results, strict=True):
        if item.ref == target.ref:
            assert isinstance(after, ItemFailure)
        else:
            assert after == before


def test_an_item_the_answer_leaves_out_fails_alone(
    scripted_server: Callable[..., ScriptedServer],
    judge_batches: dict[str, JudgeBatch],
    recordings: dict[str, Recording],
) -> None:
    # Given the second request of the pairs batch (two pairs) and a third pair
    # the model's real answer never mentions
    batch = judge_batches["pairs"]
    last = _recordings_of(recordings, "pairs")[-1]
    answered = batch.items[4:]
    extra = replace(batch.items[0], ref="p6")
    assert isinstance(extra, PairItem)
    results = _answered_with(scripted_server, last, batch).judge(batch.now, [*answered, extra])
    assert [type(r) for r in results] == [Verdict, Verdict, ItemFailure]
    assert results[2].ref == "p6"


def test_a_request_nobody_recorded_is_an_error_naming_its_digest(
    judge_batches: dict[str, JudgeBatch],
) -> None:
    batch = judge_batches["no-logprobs"]
    first = batch.items[0]
    assert isinstance(first, PairItem)
    changed = replace(first, similarity=first.similarity + 0.1)
    with _recorded(batch) as judge:
        client = OpenAICompatibleJudge(judge.server.url, MODEL_ALIAS, None, 10.0, 0, logprobs=False)
        digest = request_digest(client.body(batch.now, [changed, *batch.items[1:]]))
        with pytest.raises(
            JudgeUnavailableError, match=f"no recording for request digest {digest}"
        ):
            judge.judge(batch.now, [changed, *batch.items[1:]])


def test_a_recording_edited_by_hand_is_refused(tmp_path: Path) -> None:
    for path in FIXTURES.glob("*.json"):
        shutil.copy(path, tmp_path / path.name)
    victim = sorted(tmp_path.glob("pairs-*.json"))[0]
    document: dict[str, Any] = json.loads(victim.read_text())
    document["request"]["temperature"] = 1
    victim.write_text(json.dumps(document))
    with pytest.raises(ConfigurationError, match=victim.name):
        load_recordings(tmp_path)
    with pytest.raises(ConfigurationError):
        load_recordings(tmp_path / "absent")
