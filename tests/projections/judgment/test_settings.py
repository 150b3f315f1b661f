"""Judge settings: one kind per deployment, and no fallback when none is configured."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._recorded import RecordedJudge
from palimpsest.projections.judgment.settings import JudgeSettings, judge_from
from tests.benchmarks.llama_server import MODEL_ALIAS
from tests.projections.judgment.batches import FIXTURES


def test_by_default_there_is_no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PALIMPSEST_JUDGE", raising=False)
    settings = JudgeSettings()
    assert settings.judge == "none"
    assert judge_from(settings) is None


def test_an_operator_judge_is_no_judge_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    # A person answers through the API; nothing here may stand in for them.
    monkeypatch.setenv("PALIMPSEST_JUDGE", "operator")
    monkeypatch.setenv("PALIMPSEST_JUDGE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("PALIMPSEST_JUDGE_MODEL", "m")
    assert judge_from(JudgeSettings()) is None


def test_an_openai_judge_is_built_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PALIMPSEST_JUDGE", "openai")
    monkeypatch.setenv("PALIMPSEST_JUDGE_URL", "http://judge.internal:8000/")
    monkeypatch.setenv("PALIMPSEST_JUDGE_MODEL", "qwen2.5-7b-instruct")
    monkeypatch.setenv("PALIMPSEST_JUDGE_API_KEY", "sk-judge")
    monkeypatch.setenv("PALIMPSEST_JUDGE_TIMEOUT_S", "30")
    monkeypatch.setenv("PALIMPSEST_JUDGE_RETRIES", "5")
    monkeypatch.setenv("PALIMPSEST_JUDGE_CONSTRAINT", "none")
    settings = JudgeSettings()
    assert "sk-judge" not in repr(settings)
    judge = judge_from(settings)
    assert isinstance(judge, OpenAICompatibleJudge)
    assert judge.model == "qwen2.5-7b-instruct"
    assert judge.base_url == "http://judge.internal:8000"
    assert (judge.timeout_s, judge.retries, judge.constraint) == (30.0, 5, "none")


@pytest.mark.parametrize(
    "env",
    [
        {"PALIMPSEST_JUDGE": "openai", "PALIMPSEST_JUDGE_MODEL": "m"},
        {"PALIMPSEST_JUDGE": "openai", "PALIMPSEST_JUDGE_URL": "http://x"},
        {"PALIMPSEST_JUDGE": "recorded"},
        {"PALIMPSEST_JUDGE": "gpt"},
        {
            "PALIMPSEST_JUDGE": "openai",
            "PALIMPSEST_JUDGE_URL": "http://x",
            "PALIMPSEST_JUDGE_MODEL": "m",
            "PALIMPSEST_JUDGE_RETRIES": "-1",
        },
    ],
)
def test_an_incomplete_or_invalid_judge_stops_startup(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError):
        JudgeSettings()


def test_a_recorded_judge_serves_the_recordings_and_names_their_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PALIMPSEST_JUDGE", "recorded")
    monkeypatch.setenv("PALIMPSEST_JUDGE_RECORDINGS", str(FIXTURES))
    judge = judge_from(JudgeSettings())
    assert isinstance(judge, RecordedJudge)
    try:
        assert judge.model == MODEL_ALIAS
        assert judge.server.url.startswith("http://127.0.0.1:")
    finally:
        judge.close()
