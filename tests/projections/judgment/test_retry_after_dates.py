"""The judge honours ``Retry-After`` as an HTTP date too, over real loopback HTTP.

A server may say when to come back rather than how long to wait (RFC 9110 §10.2.3);
the judge used to read only seconds and fall back to its own, shorter backoff on a
date, so it hammered a rate-limited endpoint sooner than it asked.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from tests.benchmarks.llama_server import MODEL_ALIAS
from tests.projections.judgment.batches import JudgeBatch
from tests.projections.judgment.test_openai_compatible import Start


def test_a_retry_after_date_is_waited_for(
    scripted_server: Start, judge_batches: dict[str, JudgeBatch]
) -> None:
    # Given an endpoint that answers 429 asking to come back in about 20 s, by date
    batch = judge_batches["singles"]
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=20), usegmt=True)
    server = scripted_server(failures=[(429, {"Retry-After": when})])
    waits: list[float] = []
    judge = OpenAICompatibleJudge(
        server.url,
        MODEL_ALIAS,
        None,
        10.0,
        3,
        constraint=batch.constraint,
        logprobs=batch.logprobs,
        max_items=batch.max_items,
        backoff_s=0.25,
        max_backoff_s=30.0,
        sleep=waits.append,
    )
    # When the batch is judged
    judge.judge(batch.now, batch.items)
    # Then it waited until then (the date has whole seconds), not its own 0.25 s
    [waited] = waits
    assert 17.0 < waited <= 20.0
    assert len(server.seen) == 2
