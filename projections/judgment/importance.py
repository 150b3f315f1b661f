"""Importance from a chat model: how much a memory matters, asked of an OpenAI-compatible model.

With ``PALIMPSEST_IMPORTANCE=openai`` (and ``PALIMPSEST_IMPORTANCE_URL``,
``PALIMPSEST_IMPORTANCE_MODEL``, optionally ``PALIMPSEST_IMPORTANCE_API_KEY``)
the decay cycle asks a chat model to rate each memory (its type, grade and
text) from 1 (small talk) to 5 (a decision, a blocker or a key fact), one request per memory,
over the judge's HTTP client, retries and failure rules
(:mod:`palimpsest.projections.judgment._openai_compatible`). The rating read is the
expected value of the model's distribution over the five digits at the
answer token (from ``top_logprobs``), else the digit it wrote; it maps to
``(rating - 1) / 4`` in [0, 1]. Without one (``heuristic``, the default) the
cycle uses :class:`~palimpsest.domain.importance.HeuristicImportance`.

An explicit importance and a pin are the heuristic's to answer (the model is
not asked). A memory whose request fails (after its retries) or whose answer
holds no rating is scored by the heuristic instead, counted in
:attr:`OpenAICompatibleImportance.fallbacks`, logged, and marked as such in its
:class:`~palimpsest.domain.importance.Assessment` (the decay cycle counts them, and
archives nothing itself in a cycle with any); after a failed
request the model is not asked again for ``cooldown_s`` (so a cycle over a
tenant's memories does not wait out every retry of a server that is down).
Ratings are cached in process by (model, type, grade, text), which a
memory's version determines: an hourly cycle asks once per new version, not
once per memory per hour.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any, Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from palimpsest.domain.importance import (
    Assessment,
    HeuristicImportance,
    ImportanceInput,
    ImportanceScorer,
)
from palimpsest.projections.judgment._answers import AnswerToken
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge, _tokens
from palimpsest.projections.judgment._prompt import TOP_LOGPROBS, Constraint
from palimpsest.projections.judgment.judge import JudgeUnavailableError

__all__ = [
    "CACHE_SIZE",
    "ImportanceSettings",
    "OpenAICompatibleImportance",
    "configured_importance",
    "importance_from",
    "rating_of",
]

CACHE_SIZE = 100_000
"""The most ratings kept in process (least recently used dropped first)."""

_DIGITS = "12345"
_GRAMMAR = "root ::= [1-5]"
_ASK = (
    "Is this memory worth keeping for future work? Score it: 5 if it records a decision,"
    " a blocker or a key fact; 3 if it is useful context; 1 if it is small talk."
    " Answer with one digit."
)
"""Levels named by what they hold: SmolLM2-135M answered "1" to everything when asked
for "1 (trivial) to 5 (essential)", and spread its ratings when asked this way."""
_log = logging.getLogger(__name__)


def _user(memory: ImportanceInput) -> str:
    """The memory, then the question: one user message (a small model follows an
    instruction after the text better than a system message before it)."""
    return (
        f"Memory (type: {memory.memory_type}, evidence: {memory.grade}):\n"
        f"{memory.text or ''}\n\n{_ASK}"
    )


def rating_of(content: str, tokens: Sequence[AnswerToken] | None) -> float | None:
    """Return the rating (1 to 5) in a model's answer, or None when it holds none.

    When ``tokens`` are given, the first token holding a digit 1-5 carries the
    model's distribution over the five digits (its ``top_logprobs``, spellings
    with whitespace added up, renormalised over the digits listed): the rating
    is that distribution's expected value. Otherwise it is the first digit 1-5
    in ``content``.
    """
    for token in tokens or ():
        if len(token.token.strip()) != 1 or token.token.strip() not in _DIGITS:
            continue
        weights = dict.fromkeys(_DIGITS, 0.0)
        for text, logprob in token.top_logprobs:
            if text.strip() in weights and text.strip() and not math.isnan(logprob):
                weights[text.strip()] += math.exp(logprob)
        total = sum(weights.values())
        if total > 0:
            return sum(int(d) * w for d, w in weights.items()) / total
        break
    found = re.search(r"[1-5]", content)
    return float(found.group()) if found else None


class OpenAICompatibleImportance:
    """An :class:`~palimpsest.domain.importance.ImportanceScorer` that asks a chat model, one
    request per memory, falling back to the heuristic for a memory it cannot rate."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        retries: int = 2,
        *,
        constraint: Constraint = "gbnf",
        logprobs: bool = True,
        cooldown_s: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Point the scorer at ``base_url`` (before ``/v1/chat/completions``).

        ``constraint`` is ``gbnf`` to force a single digit with llama.cpp's
        ``grammar`` field, ``none`` for servers that refuse unknown fields;
        ``logprobs=False`` reads the written digit only.
        """
        self._client = OpenAICompatibleJudge(
            base_url, model, api_key, timeout_s, retries, constraint="none", logprobs=False
        )
        self._model = model
        self.constraint: Constraint = constraint
        self.logprobs = logprobs
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._heuristic: ImportanceScorer = HeuristicImportance()
        self._cache: OrderedDict[tuple[str, str, str, str], float] = OrderedDict()
        self._lock = threading.Lock()
        self._quiet_until = -math.inf
        self.asked = 0
        """Requests sent to the model."""
        self.fallbacks = 0
        """Memories scored by the heuristic because the model could not rate them."""

    @property
    def model(self) -> str:
        """The model asked for."""
        return self._model

    def body(self, memory: ImportanceInput) -> dict[str, Any]:
        """Return the request body sent for ``memory``."""
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": "user", "content": _user(memory)}],
            "temperature": 0,
            "max_tokens": 2,
        }
        if self.constraint == "gbnf":
            body["grammar"] = _GRAMMAR
        if self.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        return body

    def importance(self, memory: ImportanceInput) -> float:
        """Return :meth:`assess`'s importance."""
        return self.assess(memory).value

    def assess(self, memory: ImportanceInput) -> Assessment:
        """Return the heuristic's answer for an explicit importance or a pin, else the
        model's rating mapped to [0, 1] (cached), else, when the model fails or
        answers no rating, the heuristic's, marked a fallback (and counted in
        :attr:`fallbacks`)."""
        if memory.explicit is not None or memory.pinned:
            return self._heuristic.assess(memory)
        key = (self._model, memory.memory_type, memory.grade, memory.text or "")
        with self._lock:  # the API's cycles and the scheduled one may share this scorer
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return Assessment(cached)
        rating = None
        if self._clock() >= self._quiet_until:
            rating = self._ask(memory)
        if rating is None:
            with self._lock:
                self.fallbacks += 1
            return Assessment(self._heuristic.importance(memory), fallback=True)
        value = min(1.0, max(0.0, (rating - 1.0) / 4.0))
        with self._lock:
            self._cache[key] = value
            if len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return Assessment(value)

    def _ask(self, memory: ImportanceInput) -> float | None:
        self.asked += 1
        try:
            # The judge's client: the room's one HTTP path (retries, Retry-After, errors).
            response = self._client.send(self.body(memory))
            choice = response["choices"][0]
            content = str(choice["message"]["content"] or "")
            rating = rating_of(content, _tokens(choice.get("logprobs")))
        except JudgeUnavailableError as e:
            self._quiet_until = self._clock() + self.cooldown_s
            _log.warning("importance model failed; using the heuristic: %s", e)
            return None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            _log.warning("importance model answered no chat completion: %r", e)
            return None
        if rating is None:
            _log.warning("importance model answered no rating: %r", content[:80])
        return rating


class ImportanceSettings(BaseSettings):
    """Which importance scorer the decay cycle uses (``PALIMPSEST_IMPORTANCE_*``)."""

    model_config = SettingsConfigDict(env_prefix="PALIMPSEST_", frozen=True, extra="ignore")

    importance: Literal["heuristic", "openai"] = "heuristic"
    importance_url: str | None = None
    importance_model: str | None = None
    importance_api_key: SecretStr | None = None
    importance_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    importance_retries: int = Field(default=2, ge=0, le=10)
    importance_constraint: Literal["gbnf", "none"] = "gbnf"
    importance_logprobs: bool = True

    @model_validator(mode="after")
    def _openai_needs_url_and_model(self) -> ImportanceSettings:
        if self.importance == "openai" and not (self.importance_url and self.importance_model):
            msg = (
                "PALIMPSEST_IMPORTANCE=openai needs PALIMPSEST_IMPORTANCE_URL and"
                " PALIMPSEST_IMPORTANCE_MODEL"
            )
            raise ValueError(msg)
        return self


@cache
def importance_from(settings: ImportanceSettings) -> ImportanceScorer:
    """Return the configured scorer: one per distinct settings in this process (so its
    cache lives as long as the process)."""
    if settings.importance != "openai":
        return HeuristicImportance()
    assert settings.importance_url is not None and settings.importance_model is not None
    key = settings.importance_api_key
    return OpenAICompatibleImportance(
        settings.importance_url,
        settings.importance_model,
        key.get_secret_value() if key else None,
        settings.importance_timeout_s,
        settings.importance_retries,
        constraint=settings.importance_constraint,
        logprobs=settings.importance_logprobs,
    )


def configured_importance() -> ImportanceScorer:
    """Return the scorer the environment configures (:class:`ImportanceSettings`).

    Raises:
        pydantic.ValidationError: the settings are invalid.
    """
    return importance_from(ImportanceSettings())
