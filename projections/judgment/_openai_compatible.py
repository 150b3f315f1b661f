"""A judge behind any OpenAI-compatible ``/v1/chat/completions`` endpoint.

A hosted API, vLLM, or llama.cpp's server (``python -m llama_cpp.server``).
Items are split into batches (:func:`palimpsest.domain.judge_state.batches`, measuring
the very request body this client sends), and each batch is one request:
:mod:`palimpsest.projections.judgment._prompt` writes it, and
:mod:`palimpsest.projections.judgment._answers` reads each item's verdict and its
distribution from the response. HTTP goes through the process's one pooled
client (:mod:`palimpsest.projections.store.http_client`), as the embedding client's
does: consecutive batches reuse a kept-alive connection.

Failures: 408, 429, 5xx, a refused or dropped connection and a timeout are
retried up to ``retries`` times with exponential backoff (``Retry-After``, in
seconds or as an HTTP date, honoured up to ``max_backoff_s``); any other status,
or a 200 that is not a chat completion, fails the call at once with
:class:`JudgeUnavailableError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from palimpsest.domain.judge_state import (
    MAX_BATCH_CHARS,
    MAX_BATCH_ITEMS,
    JSONValue,
    JudgeItem,
    batches,
)
from palimpsest.projections.judgment._answers import AnswerToken, read_answers
from palimpsest.projections.judgment._prompt import (
    Constraint,
    canonical_json,
    request_body,
    request_chars,
)
from palimpsest.projections.judgment.judge import ItemFailure, JudgeUnavailableError, JudgeUsage
from palimpsest.projections.store.http_client import HTTPCallError, post_json

if TYPE_CHECKING:
    from datetime import datetime

    from palimpsest.domain.verdicts import Verdict

__all__ = [
    "OpenAICompatibleJudge",
]


class OpenAICompatibleJudge:
    """A judge that asks a chat model, one request per batch of items."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        retries: int = 3,
        *,
        constraint: Constraint = "gbnf",
        logprobs: bool = True,
        max_items: int = MAX_BATCH_ITEMS,
        max_chars: int = MAX_BATCH_CHARS,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Point the judge at ``base_url`` (the part before ``/v1/chat/completions``).

        ``constraint`` is ``gbnf`` for servers that take llama.cpp's
        ``grammar`` field (llama.cpp), ``none`` for those that refuse unknown
        fields (OpenAI's API). ``logprobs=False`` stops asking for
        probabilities (for a server that refuses the field); every verdict
        then carries none. The first retry waits ``backoff_s``, each next one
        twice as long, none longer than ``max_backoff_s``.
        """
        self.base_url = base_url.rstrip("/")
        self._model = model
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries
        self.constraint: Constraint = constraint
        self.logprobs = logprobs
        self.max_items = max_items
        self.max_chars = max_chars
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep
        self._usage = JudgeUsage()

    @property
    def model(self) -> str:
        """The model asked for."""
        return self._model

    @property
    def usage(self) -> JudgeUsage:
        """What the last :meth:`judge` call cost, batch by batch as it went."""
        return self._usage

    def body(self, now: datetime, items: Sequence[JudgeItem]) -> dict[str, JSONValue]:
        """Return the request body this judge sends for one batch of ``items``."""
        return request_body(
            self._model, now, items, constraint=self.constraint, logprobs=self.logprobs
        )

    def batches(self, now: datetime, items: Sequence[JudgeItem]) -> list[list[JudgeItem]]:
        """Return the batches :meth:`judge` sends, each one request.

        A caller that meters every send (a budget reserving before each
        request) calls :meth:`judge` once per batch returned here.
        """

        def measure(when: datetime, batch: Sequence[JudgeItem]) -> int:
            return request_chars(
                self._model, when, batch, constraint=self.constraint, logprobs=self.logprobs
            )

        return batches(
            now, items, max_items=self.max_items, max_chars=self.max_chars, measure=measure
        )

    def judge(self, now: datetime, items: Sequence[JudgeItem]) -> list[Verdict | ItemFailure]:
        """Return one verdict or failure per item, in order, one request per batch.

        Raises:
            JudgeUnavailableError: a request failed after its retries, or was refused.
            InvalidInputError: the items cannot be rendered.
        """
        self._usage = JudgeUsage()
        results: list[Verdict | ItemFailure] = []
        for batch in self.batches(now, items):
            response = self.send(self.body(now, batch))
            results.extend(self._read(batch, response))
        return results

    def _read(self, batch: Sequence[JudgeItem], response: Any) -> list[Verdict | ItemFailure]:
        try:
            choice = response["choices"][0]
            content = choice["message"]["content"] or ""
            tokens = _tokens(choice.get("logprobs"))
            model = str(response.get("model") or self._model)
            usage = response.get("usage") or {}
            spent = JudgeUsage(
                1, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
            )
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
            msg = f"the judge at {self.base_url} answered with no chat completion ({e!r})"
            raise JudgeUnavailableError(msg) from e
        self._usage = self._usage + spent
        return read_answers(batch, str(content), tokens, model)

    def send(self, body: dict[str, JSONValue]) -> Any:
        """POST ``body`` to the chat-completions endpoint and return the decoded answer,
        retrying transient failures (connection errors, 408, 429, 5xx) with backoff
        that honours ``Retry-After``. The judge, the summariser and the importance
        scorer all call the model through it.

        Raises:
            JudgeUnavailableError: the retries ran out, or the answer was refused.
        """
        data = canonical_json(body).encode()
        url = f"{self.base_url}/v1/chat/completions"
        attempt = 0
        while True:
            try:
                return post_json(url, data, timeout_s=self.timeout_s, api_key=self._api_key)
            except HTTPCallError as e:
                if not e.transient:
                    refused = e.status is not None and not 200 <= e.status < 300
                    msg = f"the judge at {self.base_url} " + (
                        f"refused the request: {e}" if refused else str(e)
                    )
                    raise JudgeUnavailableError(msg) from e
                if attempt >= self.retries:
                    msg = f"the judge at {self.base_url} failed {attempt + 1} times; last: {e}"
                    raise JudgeUnavailableError(msg) from e
                delay = self.backoff_s * 2**attempt
                if e.retry_after_s is not None:
                    delay = max(delay, e.retry_after_s)
                self._sleep(min(delay, self.max_backoff_s))
                attempt += 1


def _tokens(logprobs: Any) -> list[AnswerToken] | None:
    """The response's ``logprobs.content`` as answer tokens, or None when it has none."""
    if not logprobs or not logprobs.get("content"):
        return None
    return [
        AnswerToken(
            str(entry["token"]),
            tuple(
                (str(alt["token"]), float(alt["logprob"]))
                for alt in entry.get("top_logprobs") or ()
            ),
        )
        for entry in logprobs["content"]
    ]
