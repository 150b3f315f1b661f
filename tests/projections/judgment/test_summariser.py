"""The summariser's settings: none by default (extractive merges, no reflections), and an
``openai`` summariser only with its endpoint and model."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from palimpsest.projections.judgment.summariser import (
    OpenAICompatibleSummariser,
    SummariserSettings,
    insights_of,
    summariser_from,
)


def test_no_summariser_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PALIMPSEST_SUMMARISER", raising=False)
    assert summariser_from(SummariserSettings()) is None


def test_an_openai_summariser_needs_its_endpoint_and_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PALIMPSEST_SUMMARISER", "openai")
    monkeypatch.setenv("PALIMPSEST_SUMMARISER_URL", "http://127.0.0.1:9")
    with pytest.raises(ValidationError):
        SummariserSettings()
    monkeypatch.setenv("PALIMPSEST_SUMMARISER_MODEL", "some-model")
    made = summariser_from(SummariserSettings())
    assert isinstance(made, OpenAICompatibleSummariser) and made.model == "some-model"
    monkeypatch.setenv("PALIMPSEST_SUMMARISER", "sometimes")
    with pytest.raises(ValidationError):
        SummariserSettings()


def test_insights_drop_markers_none_and_copies_of_a_note() -> None:
    notes = ["Kim wants a security review before every release."]
    answer = (
        "1. Kim cares about security\n- kim wants a security review before every release.\n"
        "NONE\n\n* Audits follow deploys\n2) a\n3. b"
    )
    assert insights_of(answer, notes) == ["Kim cares about security", "Audits follow deploys", "a"]
    assert insights_of("NONE", notes) == []
