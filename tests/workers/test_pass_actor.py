"""The ``forgetting_pass`` actor: a leftover hint with the pass off is a no-op; on,
the first hint after the day's due time runs the day's pass, and later ones don't."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import dramatiq
from dramatiq.brokers.stub import StubBroker

from palimpsest.projections.commands.writer import CapturePolicy, Writer
from palimpsest.projections.drains.forgetting_pass import ScheduledPass
from palimpsest.projections.drains.settings import ForgettingPassSettings
from palimpsest.projections.judgment._openai_compatible import OpenAICompatibleJudge
from palimpsest.projections.runtime import Runtime
from palimpsest.workers._forgetting import register_forgetting_actor


class _Recording(ScheduledPass):
    """The real scheduled pass, remembering what each hint returned."""

    returned: list[Any]

    def __call__(self, now: Any) -> Any:
        result = super().__call__(now)
        self.returned.append(result)
        return result


def _run(runtime: Runtime, settings: ForgettingPassSettings, hints: int) -> list[Any]:
    policy = CapturePolicy(raw_retention=timedelta(days=1), transient_retention=timedelta(days=1))
    judge = OpenAICompatibleJudge("http://127.0.0.1:9", "none", retries=0)  # never reached
    scheduled = _Recording(
        runtime.log,
        Writer(runtime.log, policy, clock=lambda: datetime.now(UTC)),
        judge,
        settings,
        lambda: "m",
    )
    scheduled.returned = []
    broker = StubBroker()
    actor = register_forgetting_actor(broker, scheduled)
    worker = dramatiq.Worker(broker, worker_timeout=100, worker_threads=1)
    worker.start()
    try:
        for _ in range(hints):
            actor.send()
            broker.join(actor.queue_name, fail_fast=True)
            worker.join()
    finally:
        worker.stop()
    return scheduled.returned


def test_a_hint_with_the_pass_off_completes_as_a_no_op(runtime: Runtime, monkeypatch: Any) -> None:
    monkeypatch.delenv("PALIMPSEST_FORGETTING_PASS_ENABLED", raising=False)
    assert _run(runtime, ForgettingPassSettings(), hints=2) == [None, None]


def test_on_the_first_hint_runs_the_days_pass_and_the_next_does_nothing(
    runtime: Runtime, monkeypatch: Any
) -> None:
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_ENABLED", "true")
    # Due a minute after midnight UTC: today's run is due whenever the test runs after it
    monkeypatch.setenv("PALIMPSEST_FORGETTING_PASS_CRON", "1 0 * * *")
    with runtime.database.owner_connection(autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{runtime.database.schema}".forgetting_runs')
    first, second = _run(runtime, ForgettingPassSettings(), hints=2)
    assert isinstance(first, list)  # the day's pass ran, over every tenant
    assert second is None
