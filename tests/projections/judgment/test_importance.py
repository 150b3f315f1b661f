"""The model importance scorer: SmolLM2-135M-Instruct's real ratings, recorded on
``llama_cpp.server`` (``tests/benchmarks/record_importance.py``) and replayed over a
loopback server; the heuristic for pins, explicit importance and failures; its cache;
its settings.

The recordings are what the model said, not what a good rating would be: the tests
check that the scorer reads the model's distribution and falls back when it must,
never that the model rates well.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace

import pytest
from pydantic import ValidationError

from palimpsest.api.cli._entry import main
from palimpsest.api.cli._exit_code import EXIT_USAGE
from palimpsest.domain.importance import HeuristicImportance, ImportanceInput
from palimpsest.projections.judgment._answers import AnswerToken
from palimpsest.projections.judgment._openai_compatible import _tokens
from palimpsest.projections.judgment._recorded import RecordingServer, load_recordings
from palimpsest.projections.judgment.importance import (
    ImportanceSettings,
    OpenAICompatibleImportance,
    configured_importance,
    rating_of,
)
from tests.benchmarks.record_importance import MEMORIES, MODEL, RECORDINGS

HEURISTIC = HeuristicImportance()


def recorded_importance(memory: ImportanceInput) -> float:
    """The model's recorded answer for ``memory``, read as the scorer reads it."""
    n = MEMORIES.index(memory)
    [path] = RECORDINGS.glob(f"rate{n}-*.json")
    choice = json.loads(path.read_text(encoding="utf-8"))["response"]["body"]["choices"][0]
    rating = rating_of(choice["message"]["content"], _tokens(choice["logprobs"]))
    assert rating is not None
    return (rating - 1) / 4


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    with RecordingServer(load_recordings(RECORDINGS)) as running:
        yield running


def test_the_recorded_ratings_are_the_models_distribution_not_the_heuristic(
    server: RecordingServer,
) -> None:
    scorer = OpenAICompatibleImportance(server.url, MODEL, retries=0)

    values = [scorer.importance(m) for m in MEMORIES]

    assert scorer.fallbacks == 0 and len(server.served) == len(MEMORIES)
    for memory, value in zip(MEMORIES, values, strict=True):
        assert 0.0 <= value <= 1.0
        assert value == pytest.approx(recorded_importance(memory))
        assert value != pytest.approx(HEURISTIC.importance(memory), abs=1e-3)
    # SmolLM2 wrote "5" for the decision and "1" for the rest, but its distribution
    # spread over the digits: the expected value, not the written digit, is kept.
    assert values[0] < 1.0 and values[2] > 0.25
    assert max(values) == values[0] and min(values) == values[3]  # small talk lowest
    # Asked again (the next hourly cycle), nothing is sent: the ratings are cached.
    assert [scorer.importance(m) for m in MEMORIES] == values
    assert len(server.served) == len(MEMORIES)


def test_pins_and_explicit_importance_are_the_heuristics_and_never_ask(
    server: RecordingServer,
) -> None:
    scorer = OpenAICompatibleImportance(server.url, MODEL, retries=0)

    pinned = replace(MEMORIES[1], pinned=True)
    explicit = replace(MEMORIES[1], explicit=0.42)

    assert scorer.importance(pinned) == HEURISTIC.importance(pinned) == 1.0
    assert scorer.importance(explicit) == HEURISTIC.importance(explicit) == 0.42
    assert server.served == [] and scorer.asked == 0 and scorer.fallbacks == 0


def test_a_failed_request_falls_back_to_the_heuristic_for_that_memory(
    server: RecordingServer, caplog: pytest.LogCaptureFixture
) -> None:
    scorer = OpenAICompatibleImportance(server.url, MODEL, retries=0, cooldown_s=0)
    unrecorded = ImportanceInput("fact", "unsupported", False, text="Ana's desk is by the window.")

    value = scorer.importance(unrecorded)

    assert value == HEURISTIC.importance(unrecorded)
    assert scorer.fallbacks == 1
    assert "using the heuristic" in caplog.text
    # A fallback is not cached: the next cycle asks again; the other memories are rated.
    assert scorer.importance(MEMORIES[0]) == pytest.approx(recorded_importance(MEMORIES[0]))
    scorer.importance(unrecorded)
    assert scorer.asked == 3 and scorer.fallbacks == 2


def test_after_a_failure_the_model_rests_and_every_memory_gets_the_heuristic(
    server: RecordingServer,
) -> None:
    now = [0.0]
    url = server.url
    server.close()  # the model server is down
    scorer = OpenAICompatibleImportance(
        url, MODEL, retries=0, timeout_s=5, cooldown_s=60, clock=lambda: now[0]
    )

    values = [scorer.importance(m) for m in MEMORIES]

    assert values == [HEURISTIC.importance(m) for m in MEMORIES]
    assert scorer.asked == 1 and scorer.fallbacks == len(MEMORIES)
    now[0] = 61.0  # after the cooldown it is tried again
    scorer.importance(MEMORIES[0])
    assert scorer.asked == 2


def test_the_rating_is_the_expected_digit_else_the_written_one() -> None:
    ln = {"1": -0.1, "3": -2.0, "Sure": -0.5}
    tokens = [AnswerToken("1", tuple(ln.items()))]
    p1, p3 = math.exp(-0.1), math.exp(-2.0)
    assert rating_of("1", tokens) == pytest.approx((p1 + 3 * p3) / (p1 + p3))
    assert rating_of("I'd say 4.", None) == 4.0
    assert rating_of("Important!", None) is None


def test_the_default_is_the_heuristic_and_openai_needs_a_url_and_a_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PALIMPSEST_IMPORTANCE", raising=False)
    assert isinstance(configured_importance(), HeuristicImportance)

    monkeypatch.setenv("PALIMPSEST_IMPORTANCE", "openai")
    monkeypatch.setenv("PALIMPSEST_IMPORTANCE_MODEL", MODEL)
    with pytest.raises(ValidationError):
        ImportanceSettings()
    # The service refuses to start, in one line, before it starts anything.
    assert main(["serve"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "PALIMPSEST_IMPORTANCE_URL" in err

    monkeypatch.setenv("PALIMPSEST_IMPORTANCE", "gpt")
    assert main(["serve"]) == EXIT_USAGE
    assert capsys.readouterr().err.startswith("palimpsest: error: PALIMPSEST_IMPORTANCE=")
