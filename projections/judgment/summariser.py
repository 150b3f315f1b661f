"""Consolidation's summariser: merged text for a group, and reflections over memories.

With ``PALIMPSEST_SUMMARISER=openai`` (and ``PALIMPSEST_SUMMARISER_URL``,
``PALIMPSEST_SUMMARISER_MODEL``, optionally ``PALIMPSEST_SUMMARISER_API_KEY``),
an OpenAI-compatible chat model writes a merge's text and the reflections
of consolidation's second pass, over the same HTTP client, retries and
failure rules as the judge (:mod:`palimpsest.projections.judgment._openai_compatible`).
Without one (``none``, the default) :func:`summariser_from` answers None:
merges are extractive (the centre's text, verbatim, chosen in
:mod:`palimpsest.domain.consolidation`) and there are no reflections (no fallback).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment.judge import JudgeUnavailableError

__all__ = [
    "MAX_REFLECTIONS",
    "OpenAICompatibleSummariser",
    "Summariser",
    "SummariserSettings",
    "insights_of",
    "summariser_from",
]

MAX_REFLECTIONS = 3
"""The most reflections kept from one answer."""

_MERGE = (
    "These notes say the same thing. Write it once, as one note, keeping every fact."
    " Answer with the note only."
)
_REFLECT = (
    "What general patterns do these notes show together? Write at most three, one per"
    " line, each starting with '- ', and do not repeat a note. If there is none, answer NONE."
)
_MARKER = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")
"""A list marker a model puts before an item: a dash, a star, a bullet, ``1.`` or ``1)``."""


class Summariser(Protocol):
    """What consolidation needs of a summariser."""

    @property
    def model(self) -> str:
        """The model whose text it returns (recorded with each merge and reflection)."""
        ...

    def summarise(self, texts: Sequence[str]) -> str:
        """Return one text stating what ``texts`` state."""
        ...

    def reflect(self, texts: Sequence[str]) -> list[str]:
        """Return general insights that ``texts`` support together (maybe none)."""
        ...


def _user(texts: Sequence[str], instruction: str) -> str:
    """The notes, numbered, then the instruction: one user message (a small model follows
    an instruction after the text better than a system message before it)."""
    notes = "\n".join(f"{n}. {text}" for n, text in enumerate(texts, start=1))
    return f"Notes:\n{notes}\n\n{instruction}"


def insights_of(answer: str, texts: Sequence[str]) -> list[str]:
    """Return the insights in a model's answer: its lines without list markers, less
    blanks, ``NONE`` and verbatim copies of a note (a copy is not an insight), at most
    :data:`MAX_REFLECTIONS`."""
    copies = {t.strip().casefold() for t in texts}
    found = []
    for line in answer.splitlines():
        item = _MARKER.sub("", line.strip()).strip()
        if item and item.upper() != "NONE" and item.casefold() not in copies:
            found.append(item)
    return found[:MAX_REFLECTIONS]


class OpenAICompatibleSummariser:
    """Asks a chat model for merged text and reflections, one request each."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
    ) -> None:
        """Point the summariser at ``base_url`` (before ``/v1/chat/completions``)."""
        self._client = OpenAICompatibleJudge(
            base_url, model, api_key, timeout_s, retries, constraint="none", logprobs=False
        )
        self._model = model

    @property
    def model(self) -> str:
        """The model asked for."""
        return self._model

    def _ask(self, instruction: str, texts: Sequence[str], max_tokens: int) -> str:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": "user", "content": _user(texts, instruction)}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        # The judge's client: the room's one HTTP path (retries, Retry-After, errors).
        response = self._client.send(body)
        try:
            return str(response["choices"][0]["message"]["content"] or "").strip()
        except (KeyError, IndexError, TypeError) as e:
            msg = f"the summariser at {self._client.base_url} answered with no chat completion"
            raise JudgeUnavailableError(msg) from e

    def summarise(self, texts: Sequence[str]) -> str:
        """Return one text stating what ``texts`` state.

        Raises:
            JudgeUnavailableError: the server failed after its retries, refused the
                request, or answered with no text.
        """
        text = self._ask(_MERGE, texts, 512)
        if not text:
            msg = f"the summariser at {self._client.base_url} answered with an empty merge"
            raise JudgeUnavailableError(msg)
        return text

    def reflect(self, texts: Sequence[str]) -> list[str]:
        """Return at most :data:`MAX_REFLECTIONS` insights over ``texts`` (none is a
        valid answer).

        Raises:
            JudgeUnavailableError: as :meth:`summarise`.
        """
        return insights_of(self._ask(_REFLECT, texts, 256), texts)


class SummariserSettings(BaseSettings):
    """Which summariser consolidation uses (``PALIMPSEST_SUMMARISER_*``)."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    summariser: Literal["openai", "none"] = "none"
    summariser_url: str | None = None
    summariser_model: str | None = None
    summariser_api_key: SecretStr | None = None
    summariser_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    summariser_retries: int = Field(default=3, ge=0, le=10)

    @model_validator(mode="after")
    def _openai_needs_url_and_model(self) -> SummariserSettings:
        if self.summariser == "openai" and not (self.summariser_url and self.summariser_model):
            msg = (
                "PALIMPSEST_SUMMARISER=openai needs PALIMPSEST_SUMMARISER_URL and"
                " PALIMPSEST_SUMMARISER_MODEL"
            )
            raise ValueError(msg)
        return self


def summariser_from(settings: SummariserSettings) -> OpenAICompatibleSummariser | None:
    """Return the configured summariser, or None (extractive merges, no reflections)."""
    if settings.summariser != "openai":
        return None
    assert settings.summariser_url is not None and settings.summariser_model is not None
    key = settings.summariser_api_key
    return OpenAICompatibleSummariser(
        settings.summariser_url,
        settings.summariser_model,
        key.get_secret_value() if key else None,
        settings.summariser_timeout_s,
        settings.summariser_retries,
    )
