"""Settings of the judge: which kind, where it is, and how to talk to it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.domain.judge_state import MAX_BATCH_CHARS, MAX_BATCH_ITEMS
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.judgment._recorded import RecordedJudge

if TYPE_CHECKING:
    from palimpsest.projections.judgment.judge import Judge

__all__ = [
    "JudgeSettings",
    "judge_from",
]


class JudgeSettings(BaseSettings):
    """Which judge decides the forgetting pass's items (``PALIMPSEST_JUDGE_*``)."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    judge: Literal["openai", "recorded", "operator", "none"] = "none"
    """``openai``: an OpenAI-compatible endpoint; ``recorded``: recorded responses;
    ``operator``: a person, through the API; ``none``: no judge, so no pass."""
    judge_url: str | None = None
    """Base URL of the endpoint (before ``/v1/chat/completions``)."""
    judge_model: str | None = None
    """The pinned model; for ``recorded``, defaults to the one the recordings name."""
    judge_api_key: SecretStr | None = None
    judge_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    """How long one request may take (a CPU model reads a 12-item batch slowly)."""
    judge_retries: int = Field(default=3, ge=0, le=10)
    """Further tries after a 429, a 5xx or a connection failure."""
    judge_constraint: Literal["gbnf", "none"] = "gbnf"
    """``gbnf`` sends llama.cpp's ``grammar`` field to force the answer format;
    ``none`` for servers that refuse unknown fields (OpenAI's API)."""
    judge_logprobs: bool = True
    """Ask for ``top_logprobs``; without them no verdict has a probability."""
    judge_batch_items: int = Field(default=MAX_BATCH_ITEMS, ge=1, le=100)
    judge_batch_chars: int = Field(default=MAX_BATCH_CHARS, ge=1_000, le=1_000_000)
    judge_recordings: Path | None = None
    """The directory of recordings (``recorded``)."""

    @model_validator(mode="after")
    def _each_kind_has_what_it_needs(self) -> JudgeSettings:
        if self.judge == "openai" and not (self.judge_url and self.judge_model):
            msg = "PALIMPSEST_JUDGE=openai needs PALIMPSEST_JUDGE_URL and PALIMPSEST_JUDGE_MODEL"
            raise ValueError(msg)
        if self.judge == "recorded" and self.judge_recordings is None:
            msg = "PALIMPSEST_JUDGE=recorded needs PALIMPSEST_JUDGE_RECORDINGS (a directory)"
            raise ValueError(msg)
        return self


def judge_from(settings: JudgeSettings) -> Judge | None:
    """Return the configured judge, or None for ``none`` and ``operator``.

    There is no fallback: None means this process judges nothing itself (with
    ``operator`` a person answers through the API; with ``none`` there is no
    pass at all). A recorded judge starts its loopback server here.

    Raises:
        ConfigurationError: the recordings cannot be loaded.
    """
    if settings.judge == "openai":
        assert settings.judge_url is not None and settings.judge_model is not None
        key = settings.judge_api_key
        return OpenAICompatibleJudge(
            settings.judge_url,
            settings.judge_model,
            key.get_secret_value() if key else None,
            settings.judge_timeout_s,
            settings.judge_retries,
            constraint=settings.judge_constraint,
            logprobs=settings.judge_logprobs,
            max_items=settings.judge_batch_items,
            max_chars=settings.judge_batch_chars,
        )
    if settings.judge == "recorded":
        assert settings.judge_recordings is not None
        return RecordedJudge(
            settings.judge_recordings,
            settings.judge_model,
            constraint=settings.judge_constraint,
            logprobs=settings.judge_logprobs,
            max_items=settings.judge_batch_items,
            max_chars=settings.judge_batch_chars,
        )
    return None
